package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// Add commits ev's deliveries to urls into the outbox at path without
// sending them, and returns the event's id: a Sender opened on the outbox
// with those endpoints (in this process or another) delivers them. It is
// for a process that records events but does not hold the endpoints'
// secrets, or does not live long enough to deliver.
func Add(ctx context.Context, path string, ev Event, urls ...string) (string, error) {
	if len(urls) == 0 {
		return "", nil
	}
	for _, u := range urls {
		if err := (Endpoint{URL: u, Secret: NewSecret()}).check(); err != nil {
			return "", err
		}
	}
	box, err := openOutbox(ctx, path)
	if err != nil {
		return "", err
	}
	defer box.close()
	id, body, now, err := message(ev)
	if err != nil {
		return "", err
	}
	if err := box.add(ctx, id, body, urls, now); err != nil {
		return "", fmt.Errorf("webhook outbox: %w", err)
	}
	return id, nil
}

// message is ev's id and body, stamped now when its time is zero.
func message(ev Event) (id string, body []byte, now time.Time, err error) {
	now = time.Now()
	if ev.Time.IsZero() {
		ev.Time = now.UTC()
	}
	data, err := json.Marshal(ev.Data)
	if err != nil {
		return "", nil, now, fmt.Errorf("webhook: %w", err)
	}
	id = NewID()
	body, err = json.Marshal(Message{ID: id, Type: ev.Type, Timestamp: ev.Time, Data: data})
	if err != nil {
		return "", nil, now, fmt.Errorf("webhook: %w", err)
	}
	return id, body, now, nil
}

// PendingURLs are the endpoints the outbox at path holds pending
// deliveries to (none when it does not exist): those a Sender needs to
// drain it.
func PendingURLs(ctx context.Context, path string) ([]string, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	box, err := openOutbox(ctx, path)
	if err != nil {
		return nil, err
	}
	defer box.close()
	rows, err := box.db.QueryContext(ctx, `SELECT DISTINCT url FROM delivery WHERE state = 0 ORDER BY url`)
	if err != nil {
		return nil, fmt.Errorf("webhook outbox: %w", err)
	}
	defer rows.Close()
	var urls []string
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			return nil, fmt.Errorf("webhook outbox: %w", err)
		}
		urls = append(urls, u)
	}
	return urls, rows.Err()
}
