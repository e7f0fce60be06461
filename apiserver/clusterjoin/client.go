package clusterjoin

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Errors a join ends with; the messages of the errors wrapping them say
// what to do.
var (
	// ErrWrongToken: the server refused the token's secret, or could not
	// prove it knows it.
	ErrWrongToken = errors.New("wrong join token")
	// ErrCAMismatch: the server's CA is not the one the token pins.
	ErrCAMismatch = errors.New("the server's CA is not the one the join token pins")
	// ErrConflict: the cluster refuses the joiner's name or address.
	ErrConflict = errors.New("join refused by the cluster")
)

// Client fetches a Bundle from a server of the cluster.
type Client struct {
	// Server is the URL of a server, e.g. https://10.0.0.1:6443.
	Server string
	// Token is the join token.
	Token Token
	// Dial, when set, replaces the network dialer (tests).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Join asks the server for the shared bundle, adding the joiner to etcd
// when req.Add is set. The server is trusted only once its CA matches the
// token's pin or, for a bare secret, once it proves it knows the secret;
// only then is the secret sent.
func (c *Client) Join(ctx context.Context, req Request) (*Bundle, []byte, error) {
	ca, err := c.trustedCA(ctx)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, nil, errors.New("the server's CA is not PEM")
	}
	body, _ := json.Marshal(req)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.Server, "/")+JoinPath, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	hreq.Header.Set("Authorization", "Bearer "+c.Token.Secret)
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := c.client(&tls.Config{RootCAs: pool}).Do(hreq)
	if err != nil {
		return nil, nil, fmt.Errorf("join through %s: %w", c.Server, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized:
		return nil, nil, fmt.Errorf("%w: %s refused it; use the token in the data directory of a server of the cluster (its file \"token\")", ErrWrongToken, c.Server)
	case http.StatusConflict:
		return nil, nil, fmt.Errorf("%w: %s", ErrConflict, strings.TrimSpace(string(data)))
	default:
		return nil, nil, fmt.Errorf("join through %s: %s: %s", c.Server, resp.Status, strings.TrimSpace(string(data)))
	}
	var b Bundle
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, nil, fmt.Errorf("join through %s: %w", c.Server, err)
	}
	if !bytes.Equal(b.Files["pki/ca.crt"], ca) {
		return nil, nil, fmt.Errorf("join through %s: the bundle's CA is not the one the server serves", c.Server)
	}
	return &b, ca, nil
}

// trustedCA fetches the server's CA and checks it against the token.
func (c *Client) trustedCA(ctx context.Context) ([]byte, error) {
	nonce := make([]byte, 16)
	rand.Read(nonce)
	u := strings.TrimRight(c.Server, "/") + CACertsPath + "?nonce=" + url.QueryEscape(hex.EncodeToString(nonce))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	// Nothing secret goes out on this connection; what comes back is
	// checked against the token below.
	resp, err := c.client(&tls.Config{InsecureSkipVerify: true}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch the CA of %s: %w", c.Server, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch the CA of %s: %s; is it a server started with --cluster-init or --join?", c.Server, resp.Status)
	}
	var cc CACerts
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&cc); err != nil {
		return nil, fmt.Errorf("fetch the CA of %s: %w", c.Server, err)
	}
	if c.Token.CAHash != "" {
		hash, err := CAHash(cc.CA)
		if err != nil {
			return nil, fmt.Errorf("the CA of %s: %w", c.Server, err)
		}
		if hash != c.Token.CAHash {
			return nil, fmt.Errorf("%w: %s serves a CA with hash %s, the token pins %s; use the token of the cluster you mean to join (the file \"token\" in its server's data directory)",
				ErrCAMismatch, c.Server, hash, c.Token.CAHash)
		}
		return cc.CA, nil
	}
	want := proof(c.Token.Secret, hex.EncodeToString(nonce), cc.CA)
	if !hmac.Equal([]byte(want), []byte(cc.Proof)) {
		return nil, fmt.Errorf("%w: %s could not prove it knows the token's secret: the token is wrong, or %s is not a server of the cluster you mean; "+
			"use the token in the file \"token\" of a server's data directory", ErrWrongToken, c.Server, c.Server)
	}
	return cc.CA, nil
}

func (c *Client) client(tlsConfig *tls.Config) *http.Client {
	t := &http.Transport{TLSClientConfig: tlsConfig, TLSHandshakeTimeout: 10 * time.Second, ForceAttemptHTTP2: false}
	if c.Dial != nil {
		t.DialContext = c.Dial
	}
	return &http.Client{Transport: t, Timeout: 30 * time.Second}
}
