// Package host is what the benchmarks read from this machine's processes
// (memory and CPU time from /proc), what they say of the machine (its CPUs
// and load, a free port) and how they wait for a component.
package host

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// MiB reads the "Name: N kB" lines of /proc/PID/<file> ("status",
// "smaps_rollup") in MiB, by name without the colon: MiB(pid,
// "status")["VmRSS"]. A process that is gone gives an empty map.
func MiB(pid int, file string) map[string]float64 {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	out := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseFloat(f[1], 64)
		if err == nil {
			out[strings.TrimSuffix(f[0], ":")] = kb / 1024
		}
	}
	return out
}

// CPU is the user plus system CPU time pid has used; 0 when it is gone.
func CPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name (which may hold spaces): utime
	// and stime are the 12th and 13th, in clock ticks of 1/100 s.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	sy, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+sy) * time.Second / 100
}

// WaitHTTP polls url (TLS not verified: the components' own certificates)
// until it answers 200.
func WaitHTTP(url string, timeout time.Duration) error {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v: %v", url, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// NumCPU is the number of CPUs online, from /proc/stat.
func NumCPU() int {
	data, _ := os.ReadFile("/proc/stat")
	return strings.Count(string(data), "\ncpu")
}

// Loadavg is the machine's load over 1, 5 and 15 minutes, as
// /proc/loadavg says it.
func Loadavg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

// FreePort is a loopback TCP port nothing listens on at the time.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
