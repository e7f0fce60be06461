package embeddedetcd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// newDataDir returns a data directory that a real embedded etcd wrote keys
// to and was stopped on.
func newDataDir(t *testing.T, keys int) string {
	t.Helper()
	dir := t.TempDir()
	s, err := Start(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := s.InProcessClient()
	for i := range keys {
		if _, err := c.Put(t.Context(), fmt.Sprintf("/k/%04d", i), strings.Repeat("v", 100)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// walFile returns the data directory's only WAL file.
func walFile(t *testing.T, dir string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "etcd", "member", "wal", "*.wal"))
	if len(files) != 1 {
		t.Fatalf("got WAL files %v, want one", files)
	}
	return files[0]
}

func dbFile(dir string) string { return filepath.Join(dir, "etcd", "member", "snap", "db") }

// walDataSize is how many bytes of the preallocated WAL file hold records.
func walDataSize(t *testing.T, path string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(bytes.TrimRight(data, "\x00")))
}

func truncate(t *testing.T, path string, size int64) {
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func overwrite(t *testing.T, path string, at int64, data []byte) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, at); err != nil {
		t.Fatal(err)
	}
}

// damageCase damages a copy of a data directory and returns the file the
// start must name.
type damageCase struct {
	name   string
	damage func(t *testing.T, dir string) (file string)
}

func damageCases() []damageCase {
	page := int64(os.Getpagesize())
	return []damageCase{{
		name: "WAL cut in half",
		damage: func(t *testing.T, dir string) string {
			w := walFile(t, dir)
			truncate(t, w, walDataSize(t, w)/2)
			return w
		},
	}, {
		name: "empty WAL",
		damage: func(t *testing.T, dir string) string {
			w := walFile(t, dir)
			truncate(t, w, 0)
			return w
		},
	}, {
		name: "WAL of zeros",
		damage: func(t *testing.T, dir string) string {
			w := walFile(t, dir)
			overwrite(t, w, 0, make([]byte, walDataSize(t, w)))
			return w
		},
	}, {
		name: "garbage inside the WAL",
		damage: func(t *testing.T, dir string) string {
			w := walFile(t, dir)
			overwrite(t, w, walDataSize(t, w)/3, []byte("garbage garbage garbage garbage"))
			return w
		},
	}, {
		name: "empty database",
		damage: func(t *testing.T, dir string) string {
			truncate(t, dbFile(dir), 0)
			return dbFile(dir)
		},
	}, {
		name: "database cut to four pages",
		damage: func(t *testing.T, dir string) string {
			truncate(t, dbFile(dir), 4*page)
			return dbFile(dir)
		},
	}, {
		name: "garbage over the database's free list",
		damage: func(t *testing.T, dir string) string {
			overwrite(t, dbFile(dir), 2*page, bytes.Repeat([]byte{0xa5}, int(page)))
			return dbFile(dir)
		},
	}, {
		name: "garbage over the database's pages",
		damage: func(t *testing.T, dir string) string {
			overwrite(t, dbFile(dir), 4*page, bytes.Repeat([]byte{0x5a}, int(4*page)))
			return dbFile(dir)
		},
	}}
}

// copyDataDir returns a copy of base to damage.
func copyDataDir(t *testing.T, base string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(base)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestStartOnDamagedDataDir pins issue 23: etcd data damaged on disk made
// the server hang forever (a WAL cut in half), panic (an empty WAL, a
// corrupt database) or fail with a message naming no file.
func TestStartOnDamagedDataDir(t *testing.T) {
	base := newDataDir(t, 1000)
	for _, tc := range damageCases() {
		t.Run(tc.name, func(t *testing.T) { startOnDamaged(t, base, tc) })
	}
	t.Run("torn WAL", func(t *testing.T) { startOnTornWAL(t, base) })
	t.Run("intact copy", func(t *testing.T) { startOnIntactCopy(t, base) })
}

// startOnDamaged checks that Start on a copy of base damaged by tc ends
// within 10 s with a DamagedError naming the file and what to do.
func startOnDamaged(t *testing.T, base string, tc damageCase) {
	dir := copyDataDir(t, base)
	file := tc.damage(t, dir)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	s, err := Start(ctx, dir)
	if err == nil {
		s.Close()
		t.Fatalf("Start succeeded on a damaged data directory")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Start took %s, want under 10s", took)
	}
	var damaged *DamagedError
	if !errors.As(err, &damaged) {
		t.Fatalf("got error %q, want a DamagedError", err)
	}
	if damaged.File != file {
		t.Errorf("got damaged file %s, want %s", damaged.File, file)
	}
	for _, want := range []string{file, "restore the data directory " + dir, "move it away"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got error %q, want it to say %q", err, want)
		}
	}
}

// startOnTornWAL: a crash can tear the WAL's last record. etcd cuts a
// torn record off and starts; a cut that loses records the database has
// applied is refused as above. Either way the start ends within 10 s (the
// issue saw 46 s).
func startOnTornWAL(t *testing.T, base string) {
	for _, cut := range []int64{5, 40, 400} {
		t.Run(fmt.Sprintf("last %d bytes torn off", cut), func(t *testing.T) {
			dir := copyDataDir(t, base)
			w := walFile(t, dir)
			truncate(t, w, walDataSize(t, w)-cut)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			start := time.Now()
			s, err := Start(ctx, dir)
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("Start took %s, want under 10s", took)
			}
			var damaged *DamagedError
			if err != nil && !errors.As(err, &damaged) {
				t.Errorf("got error %q, want a start or a DamagedError", err)
			}
			if err == nil {
				s.Close()
			}
		})
	}
}

// startOnIntactCopy: the check passes an undamaged copy, whose keys are
// all there.
func startOnIntactCopy(t *testing.T, base string) {
	s, err := Start(t.Context(), copyDataDir(t, base))
	if err != nil {
		t.Fatalf("Start on an intact copy: %v", err)
	}
	defer s.Close()
	r, err := s.InProcessClient().Get(t.Context(), "/k/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if r.Count != 1000 {
		t.Errorf("got %d keys, want 1000", r.Count)
	}
}

// TestStartOnDataDirInUse pins a review finding on issue 23: a second
// server on a data directory that a running one holds was told the
// database was damaged and advised to move the directory away.
func TestStartOnDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	second, err := Start(t.Context(), dir)
	if err == nil {
		second.Close()
		t.Fatal("a second Start on a data directory in use succeeded")
	}
	var inUse *InUseError
	if !errors.As(err, &inUse) {
		t.Fatalf("got error %q, want an InUseError", err)
	}
	for _, want := range []string{dir, "in use by another process"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got error %q, want it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "move it away") {
		t.Errorf("got error %q, want no advice to move the directory away", err)
	}
	if _, err := s.InProcessClient().Put(t.Context(), "/still", "serving"); err != nil {
		t.Errorf("the first server after the second Start: %v", err)
	}
}
