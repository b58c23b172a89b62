package acp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent"
)

// turnState is one prompt as the reader goroutine sees it.
type turnState struct {
	ctx context.Context
	t   agent.Turn
	log *slog.Logger

	mu    sync.Mutex // held while an update is mapped and emitted
	text  strings.Builder
	tools map[string]*toolInfo
}

type toolInfo struct {
	name  string
	start time.Time
}

func newTurnState(ctx context.Context, t agent.Turn, log *slog.Logger) *turnState {
	return &turnState{ctx: ctx, t: t, log: log, tools: map[string]*toolInfo{}}
}

// emit sends one event, logging what could not be sent.
func (ts *turnState) emit(eventType string, data json.RawMessage) error {
	err := ts.t.Emit(eventType, data)
	if err != nil && !errors.Is(err, agent.ErrTurnDone) {
		ts.log.Debug("acp: event not delivered", "event_type", eventType, "err", err)
	}
	return err
}

// handleLocked maps one update to events and emits them. ts.mu is held.
func (ts *turnState) handleLocked(u json.RawMessage) error {
	for _, ev := range ts.mapUpdate(u) {
		if err := ts.emit(ev.typ, ev.data); err != nil {
			return err
		}
	}
	return nil
}
