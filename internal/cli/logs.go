package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/client"
)

var logsCommand = command{
	name:    "logs",
	summary: "show a box's recent log records; --follow streams new ones",
	run:     runLogs,
}

func runLogs(ctx context.Context, stdio IO, args []string) error {
	var bf boxFlags
	var follow, asJSON bool
	var since string
	fs := newFlags(stdio, "logs", "logs [--follow] [--since 10m|TIME] [--json] [--url URL --key KEY | --box NAME]\n\nPrints the box's recent log records (GET /logs: the key, or a token with the logs\nor admin scope). The box keeps its latest 2000 records; --follow then streams new\nones until Ctrl-C. One line a session opening, resuming and closing and a prompt\nending; never prompt text or keys."+"\n"+endpointsHelp)
	bf.register(fs)
	fs.BoolVarP(&follow, "follow", "f", false, "keep streaming new records until Ctrl-C")
	fs.StringVar(&since, "since", "", "only records from this long ago (10m, 2h) or since this time (RFC 3339)")
	fs.BoolVar(&asJSON, "json", false, "print each record as the box's JSON")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: logs takes no arguments", ErrUsage)
	}
	var o client.LogOptions
	o.Follow = follow
	if since != "" {
		if d, err := time.ParseDuration(since); err == nil && d >= 0 {
			o.Since = time.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, since); err == nil {
			o.Since = t
		} else {
			return fmt.Errorf("%w: --since %q: want a duration (10m) or an RFC 3339 time (2026-01-02T15:04:05Z)", ErrUsage, since)
		}
	}
	c, b, err := bf.open(stdio)
	if err != nil {
		return err
	}
	defer c.Close()
	for rec, err := range b.Logs(ctx, o) {
		if err != nil {
			return err
		}
		if asJSON {
			stdio.Stdout.Write(append(rec, '\n'))
			continue
		}
		fmt.Fprintln(stdio.Stdout, formatRecord(rec))
	}
	return nil
}

// formatRecord shows a slog JSON record as one line of text: time, level,
// message, then the attributes in the order the box logged them.
func formatRecord(rec json.RawMessage) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(rec, &fields) != nil {
		return string(rec)
	}
	order := keyOrder(rec)
	str := func(k string) string {
		var s string
		if json.Unmarshal(fields[k], &s) != nil {
			return string(fields[k])
		}
		return s
	}
	var b strings.Builder
	if t, err := time.Parse(time.RFC3339Nano, str("time")); err == nil {
		b.WriteString(t.Local().Format("15:04:05.000"))
	} else {
		b.WriteString(str("time"))
	}
	fmt.Fprintf(&b, " %-5s %s", str("level"), str("msg"))
	for _, k := range order {
		if k == "time" || k == "level" || k == "msg" {
			continue
		}
		v := string(fields[k])
		var s string
		if json.Unmarshal(fields[k], &s) == nil && s != "" && !strings.ContainsAny(s, " \"=") {
			v = s
		}
		fmt.Fprintf(&b, " %s=%s", k, v)
	}
	return b.String()
}

// keyOrder returns an object's top-level keys in their order in the text.
func keyOrder(rec json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(rec))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		k, _ := t.(string)
		keys = append(keys, k)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			break
		}
	}
	if keys == nil {
		var m map[string]any
		json.Unmarshal(rec, &m)
		keys = slices.Sorted(maps.Keys(m))
	}
	return keys
}
