package sandbox

import "runtime"

// OwnThread runs f on an OS thread that ends with it, and returns once f
// has. Work that blocks in system calls (starting, killing and reaping
// processes, removing a session's files) makes the Go runtime start new
// threads to run everything else meanwhile, and the runtime keeps every
// thread it ever started: a busy moment would leave the kit with hundreds
// of idle threads for good. A goroutine that ends while locked to its
// thread takes the thread with it, so the count falls back once the
// blocking work is done.
func OwnThread(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		f()
	}()
	<-done
}
