package embeddedetcd

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.uber.org/zap"
)

// DamagedError says that a file of the etcd data directory cannot be
// started from, and what the user can do about it.
type DamagedError struct {
	// DataDir is the --data-dir holding the file.
	DataDir string
	// File is the damaged file (or directory, for the WAL as a whole).
	File string
	// Problem says what is wrong with it.
	Problem string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("etcd data file %s is damaged: %s; restore the data directory %s from a backup "+
		"(or an etcd snapshot through `etcdutl snapshot restore`), or move it away to start an empty cluster",
		e.File, e.Problem, e.DataDir)
}

// checkMember looks for damage in an etcd member directory left by an
// earlier run, before etcd opens it. etcd meets such damage badly: an empty
// WAL file panics in its bootstrap, a WAL that lost records it had already
// applied is "repaired" (renamed *.broken) and then never becomes ready, a
// corrupt database panics in bbolt. None of that names the file. A member
// directory without a WAL is a new member, which etcd creates.
func checkMember(dataDir, memberDir string) error {
	walDir := filepath.Join(memberDir, "wal")
	dbPath := filepath.Join(memberDir, "snap", "db")
	damaged := func(file, format string, args ...any) error {
		return &DamagedError{DataDir: dataDir, File: file, Problem: fmt.Sprintf(format, args...)}
	}
	walFiles, err := filepath.Glob(filepath.Join(walDir, "*.wal"))
	if err != nil || len(walFiles) == 0 {
		return nil
	}
	for _, f := range walFiles {
		if fi, err := os.Stat(f); err == nil && fi.Size() == 0 {
			return damaged(f, "the WAL file is empty")
		}
	}
	// etcd writes its database before its first WAL record; a WAL without
	// a database lost everything the WAL no longer holds.
	if fi, err := os.Stat(dbPath); err != nil || fi.Size() == 0 {
		return damaged(dbPath, "the database is missing or empty while the WAL in %s holds the member's log", walDir)
	}
	applied, err := checkDB(dbPath)
	if err != nil {
		return damaged(dbPath, "%v", err)
	}
	// With a single WAL file, the damage is in that file.
	walName := walDir
	if len(walFiles) == 1 {
		walName = walFiles[0]
	}
	last, commit, err := readWAL(walDir, filepath.Join(memberDir, "snap"))
	if err != nil {
		return damaged(walName, "%v", err)
	}
	// etcd syncs a WAL record before it applies the entry, so a database
	// ahead of its WAL means the WAL lost synced records.
	if applied > last {
		return damaged(walName, "the WAL ends at entry %d but the database has applied entries up to %d", last, applied)
	}
	if commit > last {
		return damaged(walName, "the WAL ends at entry %d but records entries up to %d as committed", last, commit)
	}
	return nil
}

// readWAL reads the WAL from the newest snapshot on, as etcd does when it
// starts, and returns the index of its last entry and its commit index.
// A torn last record, as a crash leaves, is not an error here (etcd cuts it
// off); a record that fails its checksum or does not decode is. Looking
// for the newest snapshot renames a corrupt *.snap file *.snap.broken, as
// etcd's start does; nothing else is written.
func readWAL(walDir, snapDir string) (last, commit uint64, err error) {
	defer func() {
		// etcd's decoders panic on records that pass their checksum but
		// do not unmarshal.
		if r := recover(); r != nil {
			err = fmt.Errorf("undecodable record: %v", r)
		}
	}()
	lg := zap.NewNop()
	walSnaps, err := wal.ValidSnapshotEntries(lg, walDir)
	if err != nil {
		return 0, 0, err
	}
	start := &walpb.Snapshot{}
	s, err := snap.New(lg, snapDir).LoadNewestAvailable(walSnaps)
	switch {
	case err == nil:
		start.Index, start.Term = s.Metadata.Index, s.Metadata.Term
	case !errors.Is(err, snap.ErrNoSnapshot):
		return 0, 0, err
	}
	w, err := wal.OpenForRead(lg, walDir, start)
	if err != nil {
		return 0, 0, err
	}
	defer w.Close()
	metadata, state, ents, err := w.ReadAll()
	if err != nil {
		return 0, 0, err
	}
	if metadata == nil {
		return 0, 0, errors.New("the WAL holds no records")
	}
	last = start.GetIndex()
	if len(ents) > 0 {
		last = ents[len(ents)-1].GetIndex()
	}
	return last, state.GetCommit(), nil
}

// checkDB checks the bbolt database at path without writing to it and
// returns the raft index of the last entry etcd applied to it.
func checkDB(path string) (applied uint64, err error) {
	if err := checkDBSize(path); err != nil {
		return 0, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		// Both passes read every page, and neither can go. walkDB runs
		// first because tx.Check cannot meet a corrupt page safely: it
		// loads the free list through bbolt's freepages, which checks
		// the pages in a goroutine of its own and panics there on the
		// first inconsistent one, ending the process with a trace and no
		// file name (garbage over the free list page does that). tx.Check
		// in turn covers what walkDB does not: the free list and pages
		// that nothing references. Its channel is drained to the end so
		// that its goroutine ends.
		if err := walkDB(tx); err != nil {
			return err
		}
		var first error
		for err := range tx.Check() {
			first = cmp.Or(first, err)
		}
		if first != nil {
			return first
		}
		meta := tx.Bucket([]byte("meta"))
		if meta == nil {
			return errors.New("the database has no meta bucket")
		}
		if v := meta.Get([]byte("consistent_index")); len(v) == 8 {
			applied = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return applied, err
}

// walkDB reads every key of every bucket. A page that bbolt finds
// inconsistent panics, and one past the end of the mapped file faults; both
// are turned into an error.
func walkDB(tx *bolt.Tx) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("unreadable page: %v", r)
		}
	}()
	return tx.ForEach(func(_ []byte, b *bolt.Bucket) error {
		return b.ForEach(func(_, _ []byte) error { return nil })
	})
}

// bbolt's file layout: two meta pages at the start, each a page header
// (16 bytes) and then magic, version, page size, flags, root bucket (16
// bytes), free list page, high-water page id, transaction id and an FNV-64a
// checksum of the fields before it.
const (
	boltMagic      = 0xED0CDAED
	boltHeaderSize = 16
	boltMetaSize   = 64
)

// checkDBSize reports a database file shorter than the pages its newest
// valid meta page says it uses: a truncated file, which bbolt would map
// and then fault on.
func checkDBSize(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	var best struct{ pageSize, highWater, txid uint64 }
	found := false
	pageSize := uint64(os.Getpagesize())
	for i := range 2 {
		buf := make([]byte, boltHeaderSize+boltMetaSize)
		if _, err := f.ReadAt(buf, int64(uint64(i)*pageSize)); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		m := buf[boltHeaderSize:]
		h := fnv.New64a()
		h.Write(m[:56])
		if binary.LittleEndian.Uint32(m[0:]) != boltMagic || binary.LittleEndian.Uint64(m[56:]) != h.Sum64() {
			continue
		}
		ps, hw, txid := uint64(binary.LittleEndian.Uint32(m[8:])), binary.LittleEndian.Uint64(m[40:]), binary.LittleEndian.Uint64(m[48:])
		if i == 0 {
			pageSize = ps
		}
		if !found || txid > best.txid {
			best.pageSize, best.highWater, best.txid, found = ps, hw, txid, true
		}
	}
	if !found {
		return errors.New("no valid bbolt meta page")
	}
	if need := best.pageSize * best.highWater; uint64(fi.Size()) < need {
		return fmt.Errorf("the file holds %d bytes but its pages reach %d: it is truncated", fi.Size(), need)
	}
	return nil
}
