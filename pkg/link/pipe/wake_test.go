package pipe_test

import (
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/link/pipe"
)

// TestWake: Wake from another goroutine ends a Wait that would sleep
// forever, and a Wake before a Wait ends that Wait at once.
func TestWake(t *testing.T) {
	a, b := pipe.New(pipe.Config{})
	defer a.Close()
	defer b.Close()
	go func() {
		time.Sleep(time.Millisecond) // most likely inside Wait by now
		a.Wake()
	}()
	if err := a.Wait(-1); err != nil {
		t.Fatal(err)
	}
	a.Wake()
	if err := a.Wait(-1); err != nil {
		t.Fatal(err)
	}
}
