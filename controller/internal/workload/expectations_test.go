package workload

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"
)

func TestExpectations(t *testing.T) {
	clk := testclock.NewFakePassiveClock(time.Unix(1000, 0))
	e := &Expectations{Clock: clk}

	if !e.Satisfied("ns/rs") {
		t.Fatalf("unknown key: got unsatisfied, want satisfied")
	}
	e.ExpectCreations("ns/rs", 2)
	e.CreationObserved("ns/rs")
	if e.Satisfied("ns/rs") {
		t.Fatalf("one of two creations seen: got satisfied, want not")
	}
	e.CreationObserved("ns/rs")
	if !e.Satisfied("ns/rs") {
		t.Fatalf("both creations seen: got unsatisfied, want satisfied")
	}
	e.CreationObserved("ns/rs") // a late event never goes below zero
	if adds, _ := e.Pending("ns/rs"); adds != 0 {
		t.Fatalf("pending adds: got %d, want 0", adds)
	}

	e.ExpectDeletions("ns/rs", []types.UID{"a", "b"})
	e.DeletionObserved("ns/rs", "a")
	e.DeletionObserved("ns/rs", "a") // marked for deletion, then deleted
	e.DeletionObserved("ns/rs", "c") // not ours
	if _, dels := e.Pending("ns/rs"); dels != 1 {
		t.Fatalf("pending deletions: got %d, want 1", dels)
	}
	if e.Satisfied("ns/rs") {
		t.Fatalf("one deletion outstanding: got satisfied, want not")
	}

	clk.SetTime(clk.Now().Add(ExpectationsTimeout + time.Second))
	if !e.Satisfied("ns/rs") {
		t.Fatalf("after the timeout: got unsatisfied, want satisfied")
	}

	e.ExpectCreations("ns/rs", 1)
	e.Delete("ns/rs")
	if !e.Satisfied("ns/rs") {
		t.Fatalf("deleted key: got unsatisfied, want satisfied")
	}
}

func TestExpectSetsCreationsAndDeletions(t *testing.T) {
	e := &Expectations{}
	e.Expect("ns/ds", 2, []types.UID{"a"})
	if adds, dels := e.Pending("ns/ds"); adds != 2 || dels != 1 {
		t.Fatalf("pending: got %d adds, %d dels, want 2, 1", adds, dels)
	}
	e.CreationObserved("ns/ds")
	e.CreationObserved("ns/ds")
	if e.Satisfied("ns/ds") {
		t.Fatalf("creations seen, deletion not: got satisfied, want not")
	}
	e.DeletionObserved("ns/ds", "a")
	if !e.Satisfied("ns/ds") {
		t.Fatalf("everything seen: got unsatisfied, want satisfied")
	}
}
