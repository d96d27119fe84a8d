// rokka-go: the Go clients of rokka's interop suite (franz-go, sarama, rocketmq-client-go v2) as one
// program with subcommands, driven by pytest like the other interop client scripts.
//
// argv: rokka-go <client> <action>, client in franz | sarama | rmq | matrix-franz | matrix-sarama |
// matrix-rmq.  The first stdin line is a JSON object of parameters (Params); the program prints one
// JSON object per stdout line ({"event": ..., ...}).  Long-lived actions (group members, matrix
// producers) read further commands from stdin and stop cleanly when stdin closes.  Every network
// wait is bounded by the "timeout_ms" parameter (default 30 s) and the whole process by a lifetime.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// Msg is one record as the tests describe it (Kafka and RocketMQ fields side by side).
type Msg struct {
	Key       *string     `json:"key"`
	Value     string      `json:"value"`
	Headers   [][2]string `json:"headers"`
	Partition *int32      `json:"partition"`
	Timestamp int64       `json:"timestamp"`
	Tag       string      `json:"tag"`
	Props     [][2]string `json:"props"`
	Delay     int         `json:"delay"`
	TxState   string      `json:"tx_state"` // rmq transactions: commit | rollback | unknown
}

// Params is the union of every action's parameters.
type Params struct {
	Brokers      []string          `json:"brokers"`
	Namesrv      string            `json:"namesrv"`
	Topic        string            `json:"topic"`
	Topics       []string          `json:"topics"`
	Partitions   int               `json:"partitions"`
	Messages     []Msg             `json:"messages"`
	Compression  string            `json:"compression"`
	Group        string            `json:"group"`
	Name         string            `json:"name"`
	Count        int               `json:"count"`
	TimeoutMs    int               `json:"timeout_ms"`
	LingerMs     int               `json:"linger_ms"`
	Mode         string            `json:"mode"`
	Idempotent   *bool             `json:"idempotent"`
	TxnID        string            `json:"txn_id"`
	Txns         []Txn             `json:"txns"`
	Credentials  []string          `json:"credentials"`
	Selector     string            `json:"selector"` // TAG | SQL92
	Expression   string            `json:"expression"`
	Broadcast    bool              `json:"broadcast"`
	Orderly      bool              `json:"orderly"`
	Check        string            `json:"check"` // rmq: state answered on check-back
	ReadCommit   bool              `json:"read_committed"`
	FromStart    *bool             `json:"from_start"`
	Configs      map[string]string `json:"configs"`
	Timestamps   []int64           `json:"timestamps"`
	Props        []string          `json:"props"`
	Jobs         []Job             `json:"jobs"`
	Commit       bool              `json:"commit"`
	TimeoutS     float64           `json:"timeout_s"`
	LingerS      float64           `json:"linger_s"`
	Seek         map[string]int64  `json:"seek"`
	Instance     string            `json:"instance"`
	Output       string            `json:"output"`
	RetryFirst   bool              `json:"retry_first"`
	User2        []string          `json:"user2"`
	ServerSide   bool              `json:"server_side"`
	Version      string            `json:"version"`
}

// Txn is one Kafka transaction: its records and whether it commits.
type Txn struct {
	Commit   bool  `json:"commit"`
	Messages []Msg `json:"messages"`
}

func (p *Params) timeout() time.Duration {
	if p.TimeoutMs <= 0 {
		return 30 * time.Second
	}
	return time.Duration(p.TimeoutMs) * time.Millisecond
}

func (p *Params) linger() time.Duration { return time.Duration(p.LingerMs) * time.Millisecond }

var outMu sync.Mutex

func emit(event string, fields map[string]any) {
	if fields == nil {
		fields = map[string]any{}
	}
	fields["event"] = event
	b, err := json.Marshal(fields)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"event":"error","error":%q}`, err.Error()))
	}
	outMu.Lock()
	os.Stdout.Write(append(b, '\n'))
	outMu.Unlock()
}

func fail(err error) {
	emit("error", map[string]any{"error": err.Error()})
	os.Exit(1)
}

var stdin = bufio.NewReaderSize(os.Stdin, 1<<20)

// readLine returns the next non-empty stdin line, or false at EOF.
func readLine() ([]byte, bool) {
	for {
		line, err := stdin.ReadBytes('\n')
		if len(line) > 0 && len(trim(line)) > 0 {
			return line, true
		}
		if err != nil {
			return nil, false
		}
	}
}

func trim(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

// stdinClosed is closed when stdin reaches EOF (long-lived actions' cue to stop).
func stdinClosed() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for {
			if _, ok := readLine(); !ok {
				close(ch)
				return
			}
		}
	}()
	return ch
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: rokka-go <franz|sarama|rmq|matrix-franz|matrix-sarama|matrix-rmq> <action>")
		os.Exit(2)
	}
	line, ok := readLine()
	if !ok {
		fail(fmt.Errorf("no parameters on stdin"))
	}
	var p Params
	if err := json.Unmarshal(line, &p); err != nil {
		fail(fmt.Errorf("bad parameters: %w", err))
	}
	time.AfterFunc(5*time.Minute, func() {
		emit("error", map[string]any{"error": "max lifetime reached"})
		os.Exit(3)
	})
	client, action := os.Args[1], os.Args[2]
	var err error
	switch client {
	case "franz":
		err = franzMain(action, &p)
	case "sarama":
		err = saramaMain(action, &p)
	case "rmq":
		err = rmqMain(action, &p)
	case "matrix-franz", "matrix-sarama", "matrix-rmq":
		err = matrixMain(client[len("matrix-"):], action, &p)
	default:
		err = fmt.Errorf("unknown client %q", client)
	}
	if err != nil {
		fail(err)
	}
	emit("done", nil)
	os.Exit(0)
}

func strp(s string) *string { return &s }

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}
