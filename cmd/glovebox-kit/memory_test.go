//go:build load

package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// startKit runs the kit in a process of its own and returns its port.
func runKit(t *testing.T, key string) (pid int, port string) {
	t.Helper()
	cmd := kitCmd(t, "GLOVEBOX_KEY="+key, "GLOVEBOX_PORT=0")
	cmd.Args = append(cmd.Args, "--manifest", writeManifest(t, key, "exec"), "--root", t.TempDir())
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		testkit.Exit(t, cmd, "the kit after SIGTERM")
	})
	addrRE := regexp.MustCompile(`addr=\S*:(\d+)`)
	sc := bufio.NewScanner(stderr)
	for port == "" && sc.Scan() {
		if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
			port = m[1]
		}
	}
	if port == "" {
		t.Fatal("no listen address logged")
	}
	go io.Copy(io.Discard, stderr)
	return cmd.Process.Pid, port
}

// status reads a field of /proc/PID/status in bytes.
func status(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read the kit's status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n << 10
		}
	}
	t.Fatalf("no %s in the kit's status", field)
	return 0
}

// sendOverLimit opens a WebSocket by hand and sends the header of a
// frame of n bytes, then payload until the kit closes the connection or
// max bytes are sent. It returns the close code the kit sent.
func sendOverLimit(port, key string, n uint64, max int) (int, error) {
	nc, br, err := rawSocket(port, key)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	h := []byte{0x81, 0x80 | 127}
	h = binary.BigEndian.AppendUint64(h, n)
	h = append(h, 0, 0, 0, 0)
	if _, err := nc.Write(h); err != nil {
		return 0, err
	}
	codes := closeCode(br)
	chunk := make([]byte, 1<<20)
	for sent := 0; sent < max; sent += len(chunk) {
		if _, err := nc.Write(chunk); err != nil {
			break
		}
	}
	return <-codes, nil
}

// sendFragmented opens a WebSocket by hand and sends one text message of
// n bytes in fragments of frag bytes, until the kit closes the
// connection. It returns the close code the kit sent.
func sendFragmented(port, key string, n, frag int) (int, error) {
	nc, br, err := rawSocket(port, key)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	codes := closeCode(br)
	payload := make([]byte, frag)
	for sent, op := 0, byte(0x1); sent < n; sent, op = sent+frag, 0x0 {
		size := min(frag, n-sent)
		if sent+size == n {
			op |= 0x80 // FIN
		}
		h := binary.BigEndian.AppendUint64([]byte{op, 0x80 | 127}, uint64(size))
		h = append(h, 0, 0, 0, 0)
		if _, err := nc.Write(h); err != nil {
			break
		}
		if _, err := nc.Write(payload[:size]); err != nil {
			break
		}
	}
	return <-codes, nil
}

// rawSocket opens a WebSocket to the kit by hand, for frames the client
// library would not send.
func rawSocket(port, key string) (net.Conn, *bufio.Reader, error) {
	nc, err := net.DialTimeout("tcp", "127.0.0.1:"+port, testkit.Timeout)
	if err != nil {
		return nil, nil, err
	}
	nc.SetDeadline(time.Now().Add(2 * testkit.Timeout))
	fmt.Fprintf(nc, "GET / HTTP/1.1\r\nHost: box\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer %s\r\n\r\n", key)
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		nc.Close()
		return nil, nil, fmt.Errorf("upgrade: %v %v", resp, err)
	}
	return nc, br, nil
}

// closeCode reads the kit's frames from br and sends the code of its
// close frame, or 0 when the connection ends without one.
func closeCode(br *bufio.Reader) <-chan int {
	codes := make(chan int, 1)
	go func() {
		for {
			var fh [2]byte
			if _, err := io.ReadFull(br, fh[:]); err != nil {
				codes <- 0
				return
			}
			l := int(fh[1] & 0x7f)
			if l == 126 {
				var x [2]byte
				io.ReadFull(br, x[:])
				l = int(binary.BigEndian.Uint16(x[:]))
			}
			p := make([]byte, l)
			io.ReadFull(br, p)
			if fh[0]&0x0f == 0x8 && len(p) >= 2 {
				codes <- int(binary.BigEndian.Uint16(p))
				return
			}
		}
	}()
	return codes
}

// refusedPeak makes sure the kit pid serving on port is up, reads its
// idle RSS, sends n messages at once with send, each of which the kit must
// refuse as too big (close code 1009), and returns the idle RSS and the
// peak (VmHWM).
func refusedPeak(t *testing.T, pid int, port string, n int, send func() (int, error)) (idle, peak int64) {
	t.Helper()
	resp, err := http.Get("http://127.0.0.1:" + port + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	idle = status(t, pid, "VmRSS")
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range codes {
		wg.Go(func() {
			code, err := send()
			if err != nil {
				t.Errorf("message %d: %v", i, err)
			}
			codes[i] = code
		})
	}
	wg.Wait()
	for i, c := range codes {
		if c != 1009 {
			t.Errorf("message %d: close code %d, want 1009 (too big)", i, c)
		}
	}
	return idle, status(t, pid, "VmHWM")
}

// TestMemoryOverLimitFrames sends 16 frames over limits.max_message at
// once to a real kit process and checks that its peak RSS stays within
// 64 MiB of idle: the frames are refused from their headers.
func TestMemoryOverLimitFrames(t *testing.T) {
	key := protocol.NewKey()
	pid, port := runKit(t, key)
	idle, peak := refusedPeak(t, pid, port, 16, func() (int, error) { return sendOverLimit(port, key, 200<<20, 200<<20) })
	t.Logf("16 concurrent 200 MiB frames over a 100 MB max_message: idle RSS %d MiB, peak %d MiB (+%d MiB)", idle>>20, peak>>20, (peak-idle)>>20)
	if peak-idle > 64<<20 {
		t.Errorf("peak RSS %d MiB is %d MiB above idle (%d MiB), want under 64 MiB", peak>>20, (peak-idle)>>20, idle>>20)
	}
}

// TestMemoryLargeFrames sends 16 frames of 20 MiB, each within
// limits.max_message, at once to a real kit process: they wait for the
// kit's frame budget instead of all being buffered together, and each is
// answered. The peak RSS is logged for BENCHMARKS.md.
func TestMemoryLargeFrames(t *testing.T) {
	key := protocol.NewKey()
	pid, port := runKit(t, key)
	resp, err := http.Get("http://127.0.0.1:" + port + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	idle := status(t, pid, "VmRSS")
	frame := []byte(`{"type":"prompt","id":"p","text":"echo ` + strings.Repeat("a", 20<<20) + `","inputs":{}}`)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			c, _, err := wsconn.Dial(testkit.Context(t, "the WebSocket handshake"), "ws://127.0.0.1:"+port+"/", wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + key}}})
			if err != nil {
				t.Errorf("frame %d: dial: %v", i, err)
				return
			}
			defer c.Close()
			c.SetWriteDeadline(time.Now().Add(5 * testkit.Timeout))
			if err := c.WriteText(frame); err != nil {
				t.Errorf("frame %d: send: %v", i, err)
				return
			}
			c.SetReadDeadline(time.Now().Add(5 * testkit.Timeout))
			for {
				b, err := c.ReadMessage()
				if err != nil {
					t.Errorf("frame %d: no answer: %v", i, err)
					return
				}
				if strings.Contains(string(b), `"id":"p"`) && (strings.Contains(string(b), `"type":"error"`) || strings.Contains(string(b), `"type":"complete"`)) {
					return
				}
			}
		})
	}
	wg.Wait()
	peak := status(t, pid, "VmHWM")
	t.Logf("16 concurrent 20 MiB frames within a 100 MB max_message (frame budget 200 MiB): idle RSS %d MiB, peak %d MiB (+%d MiB)", idle>>20, peak>>20, (peak-idle)>>20)
}

// TestMemoryOverLimitFragments sends 8, then 16, messages of
// limits.max_message plus one byte at once to a real kit process, each
// in fragments of 1 MiB, so that no header gives its size away: each is
// refused once the bytes it brought pass max_message, and the kit's
// peak RSS stays within 1.25 times its frame budget (200 MiB) of idle.
func TestMemoryOverLimitFragments(t *testing.T) {
	const budget = 200 << 20
	for _, n := range []int{8, 16} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			key := protocol.NewKey()
			pid, port := runKit(t, key)
			idle, peak := refusedPeak(t, pid, port, n, func() (int, error) { return sendFragmented(port, key, 100<<20+1, 1<<20) })
			t.Logf("%d concurrent messages of 100 MiB + 1 byte in 1 MiB fragments, frame budget 200 MiB: idle RSS %d MiB, peak %d MiB (+%d MiB)", n, idle>>20, peak>>20, (peak-idle)>>20)
			if peak-idle > budget*5/4 {
				t.Errorf("peak RSS %d MiB is %d MiB above idle (%d MiB), want at most 1.25 x the frame budget (%d MiB)", peak>>20, (peak-idle)>>20, idle>>20, budget*5/4>>20)
			}
		})
	}
}

// TestMemoryMaxMessage sends one prompt of exactly limits.max_message
// (100 MiB), its inline input filling it, to a real kit process, as one
// frame and then in fragments of 1 MiB, and waits for its answer. One
// frame is read into a buffer of its size; fragments into pooled pieces,
// then copied out at its size. Decoding copies the input's data once,
// into its string, which is written to disk a block at a time. The peak
// RSS above idle must stay within 32 MiB of that: two times the message
// for one frame, three for fragments.
func TestMemoryMaxMessage(t *testing.T) {
	const size = 100 << 20
	head := `{"type":"prompt","id":"p","text":"wc -c \"$GLOVEBOX_INPUT/in\"","inputs":{"in":{"kind":"inline","name":"in","mime":"text/plain","data":"`
	tail := `"}}}`
	frame := []byte(head + strings.Repeat("QUJD", (size-len(head)-len(tail))/4))
	frame = append(frame, strings.Repeat("=", size-len(frame)-len(tail))+tail...)
	decoded := strconv.Itoa((size - len(head) - len(tail)) / 4 * 3)
	for _, tc := range []struct{ frag, copies int }{{size, 2}, {1 << 20, 3}} {
		frag := tc.frag
		t.Run(strconv.Itoa(frag), func(t *testing.T) {
			key := protocol.NewKey()
			pid, port := runKit(t, key)
			resp, err := http.Get("http://127.0.0.1:" + port + "/health")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			idle := status(t, pid, "VmRSS")
			nc, br, err := rawSocket(port, key)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(5 * testkit.Timeout))
			for sent, op := 0, byte(0x1); sent < len(frame); sent, op = sent+frag, 0x0 {
				n := min(frag, len(frame)-sent)
				if sent+n == len(frame) {
					op |= 0x80
				}
				h := binary.BigEndian.AppendUint64([]byte{op, 0x80 | 127}, uint64(n))
				if _, err := nc.Write(append(append(h, 0, 0, 0, 0), frame[sent:sent+n]...)); err != nil {
					t.Fatal(err)
				}
			}
			answer := awaitAnswer(t, br, `"id":"p"`)
			peak := status(t, pid, "VmHWM")
			t.Logf("one prompt of 100 MiB (max_message), its inline input filling it, in fragments of %d bytes: answered %.120s; idle RSS %d MiB, peak %d MiB (+%d MiB)", frag, answer, idle>>20, peak>>20, (peak-idle)>>20)
			if !strings.Contains(answer, `"type":"complete"`) || !strings.Contains(answer, `"message":"`+decoded+" ") {
				t.Errorf("answer = %.300s, want complete, the input's %s bytes counted", answer, decoded)
			}
			if bound := int64(tc.copies*size + 32<<20); peak-idle > bound {
				t.Errorf("peak RSS %d MiB is %d MiB above idle (%d MiB), want at most %d MiB", peak>>20, (peak-idle)>>20, idle>>20, bound>>20)
			}
		})
	}
}

// awaitAnswer reads the kit's frames from br until a complete or error
// frame containing match, and returns it.
func awaitAnswer(t *testing.T, br *bufio.Reader, match string) string {
	t.Helper()
	for {
		var fh [2]byte
		if _, err := io.ReadFull(br, fh[:]); err != nil {
			t.Fatalf("no answer: %v", err)
		}
		l := uint64(fh[1] & 0x7f)
		switch l {
		case 126:
			var x [2]byte
			io.ReadFull(br, x[:])
			l = uint64(binary.BigEndian.Uint16(x[:]))
		case 127:
			var x [8]byte
			io.ReadFull(br, x[:])
			l = binary.BigEndian.Uint64(x[:])
		}
		p := make([]byte, l)
		if _, err := io.ReadFull(br, p); err != nil {
			t.Fatalf("no answer: %v", err)
		}
		if s := string(p); strings.Contains(s, match) && (strings.Contains(s, `"type":"complete"`) || strings.Contains(s, `"type":"error"`)) {
			return s
		}
	}
}
