package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// EventComponent is the source.component of the controller's Events.
const EventComponent = "fleet-role-controller"

// EventSink writes core/v1 Events, each in its own namespace: what
// internal/nodeevents' recorder writes to. Events are written as
// client-go's core/v1 recorder writes them (nodeevents/recorder.go says why
// not with it), not as events.k8s.io/v1's (tools/events): that package
// imports client-go's whole clientset and its scheme of every API group,
// which cost 14.4 MB of executable and 5.6 MiB of resident memory at start
// (measured: 43.1 MB and 23.1 MiB against 28.7 MB and 17.4 MiB) in every
// process of the one binary, the probe on every node included. Both APIs
// store the same Event objects, and kubectl describe lists them the same
// way. Errors pass unwrapped: the recorder tells an Event that has expired
// before its patch, and one that exists already, by the API error's type.
type EventSink struct{ rc rest.Interface }

// EventSink is a sink over a client of its own, with its own rate limit
// (the same figures): a fleet whose hosts all change verdict at once (every
// window filling after an install) records an Event per host, and through
// the shared client they would queue the status's own write behind them.
func (c *Client) EventSink() (*EventSink, error) {
	rc, err := newCoreREST(c.cfg)
	if err != nil {
		return nil, fmt.Errorf("events client: %w", err)
	}
	return &EventSink{rc: rc}, nil
}

func (s *EventSink) client(ns string) *typed[*corev1.Event, *corev1.EventList] {
	return newTyped("events", s.rc, coreParams, ns,
		func() *corev1.Event { return &corev1.Event{} }, func() *corev1.EventList { return &corev1.EventList{} })
}

// Create writes e in its namespace.
func (s *EventSink) Create(ctx context.Context, e *corev1.Event) (*corev1.Event, error) {
	return s.client(e.Namespace).Create(ctx, e, metav1.CreateOptions{})
}

// MergePatch applies a JSON merge patch to the Event name of namespace.
func (s *EventSink) MergePatch(ctx context.Context, namespace, name string, patch []byte) (*corev1.Event, error) {
	return s.client(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
}
