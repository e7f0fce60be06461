package auth

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

// TokenFile authenticates bearer tokens against a file of lines
//
//	sha256-hex-of-token,user,uid,"group1,group2"
//
// Only hashes are stored, so the file does not hand out credentials to
// whoever reads it. The file is read again when it changes, so a token
// minted by `portal kubeconfig` works without a restart.
type TokenFile struct {
	path string

	mu      sync.Mutex
	modTime time.Time
	size    int64
	users   map[string]*user.DefaultInfo
}

// NewTokenFile returns an authenticator reading path (which may not exist yet).
func NewTokenFile(path string) *TokenFile {
	return &TokenFile{path: path}
}

// AuthenticateToken looks the token's hash up in the file.
func (f *TokenFile) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	users, err := f.load()
	if err != nil {
		return nil, false, err
	}
	u, ok := users[HashToken(token)]
	if !ok {
		return nil, false, nil
	}
	return &authenticator.Response{User: u}, true, nil
}

func (f *TokenFile) load() (map[string]*user.DefaultInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(f.path)
	if os.IsNotExist(err) {
		f.users = nil
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if f.users != nil && st.ModTime().Equal(f.modTime) && st.Size() == f.size {
		return f.users, nil
	}
	users, err := readTokenFile(f.path)
	if err != nil {
		return nil, err
	}
	f.users, f.modTime, f.size = users, st.ModTime(), st.Size()
	return users, nil
}

func readTokenFile(path string) (map[string]*user.DefaultInfo, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	users := map[string]*user.DefaultInfo{}
	sc := bufio.NewScanner(file)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.SplitN(line, ",", 4)
		if len(parts) < 2 || len(parts[0]) != sha256.Size*2 || parts[1] == "" {
			return nil, fmt.Errorf("%s:%d: want sha256-hex,user[,uid[,groups]]", path, n)
		}
		u := &user.DefaultInfo{Name: parts[1]}
		if len(parts) > 2 {
			u.UID = parts[2]
		}
		if len(parts) > 3 {
			for _, g := range strings.Split(strings.Trim(parts[3], `"`), ",") {
				if g = strings.TrimSpace(g); g != "" {
					u.Groups = append(u.Groups, g)
				}
			}
		}
		users[strings.ToLower(parts[0])] = u
	}
	return users, sc.Err()
}

// HashToken is the form in which a token is kept in the token file.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// AppendToken adds a line for token to the file at path (mode 0600).
func AppendToken(path, token, name string, groups []string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s,%s,%s,%q\n", HashToken(token), name, name, strings.Join(groups, ","))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
