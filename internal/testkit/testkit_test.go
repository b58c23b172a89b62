package testkit_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func TestChildrenListsARunningChild(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kids := testkit.Children()
	_ = cmd.Process.Kill()
	_ = testkit.Exit(t, cmd, "sleep 30")
	if !strings.Contains(strings.Join(kids, "\n"), "sleep 30") {
		t.Errorf("Children() = %q, want it to list sleep 30", kids)
	}
	if kids := testkit.Children(); len(kids) != 0 {
		t.Errorf("Children() after the child was reaped = %q, want none", kids)
	}
}

func TestNoGoroutinesWaitsForThemToEnd(t *testing.T) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { parked(stop); close(done) }()
	close(stop)
	testkit.NoGoroutines(t, "testkit_test.parked")
	<-done
}

func parked(stop <-chan struct{}) { <-stop }

func TestLogBufferUntil(t *testing.T) {
	var l testkit.LogBuffer
	go func() {
		for range 3 {
			l.Write([]byte("msg=tick\n"))
		}
	}()
	l.Until(t, 3, "msg=tick")
	if got := l.Count("msg=tick"); got != 3 {
		t.Errorf("Count(msg=tick) = %d, want 3", got)
	}
}
