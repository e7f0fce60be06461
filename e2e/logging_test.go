package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"portal.dev/portal/e2e/framework"
)

// With --logging-format json every line `portal server` writes is a JSON
// object, from start to a SIGTERM stop, the embedded etcd's included (it
// logs through zap, apart from klog).
func TestServerLogsJSON(t *testing.T) {
	s := framework.StartServer(t, "--logging-format", "json")
	s.MustKubectl("create", "service", "clusterip", "logs-json", "--tcp=80:8080")
	s.Stop()
	data, err := os.ReadFile(filepath.Join(s.DataDir, "portal.log"))
	if err != nil {
		t.Fatal(err)
	}
	loggers := map[string]int{}
	lines := 0
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var record struct {
			Msg    string `json:"msg"`
			Logger string `json:"logger"`
		}
		if err := json.Unmarshal([]byte(line), &record); err != nil || record.Msg == "" {
			t.Errorf("line %d is not a JSON log record (%v): %s", i+1, err, line)
			continue
		}
		lines++
		loggers[record.Logger]++
	}
	if loggers["etcd"] == 0 {
		t.Errorf("no record of the embedded etcd among %d (records per logger: %v)", lines, loggers)
	}
}
