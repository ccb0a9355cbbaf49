package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// Events are written with client-go's core/v1 recorder (tools/record, the
// one the kubelet writes its Node events with), whose correlator
// aggregates repeated and similar events and rate-limits each object, over
// this package's core/v1 client. Not with client-go's events.k8s.io/v1
// recorder (tools/events): that package imports client-go's whole
// clientset and its scheme of every API group, which cost 14.4 MB of
// executable and 5.6 MiB of resident memory at start (measured: 43.1 MB
// and 23.1 MiB against 28.7 MB and 17.4 MiB) in every process of the one
// binary, the probe on every node included. Both APIs store the same Event
// objects, and kubectl describe lists them the same way.

// EventComponent is the source.component of the controller's Events.
const EventComponent = "fleet-role-controller"

// EventRecorder starts client-go's recorder writing to this client's API
// server; stop flushes nothing and ends its goroutines. Events about a
// cluster-scoped object (a Node) go to namespace default: the recorder puts
// them there, and the API server admits an Event on a cluster-scoped
// object in no other (docs/operators.md, "Events").
//
// The Events go through a client of their own, with its own rate limit (the
// same figures): a fleet whose hosts all change verdict at once (every
// window filling after an install) records an Event per host, and through
// the shared client they would queue the status's own write behind them.
func (c *Client) EventRecorder() (rec record.EventRecorder, stop func(), err error) {
	rc, err := newCoreREST(c.cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("events client: %w", err)
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(eventSink{rc: rc})
	return b.NewRecorder(coreScheme, corev1.EventSource{Component: EventComponent}), b.Shutdown, nil
}

// eventSink is record.EventSink over the core/v1 client, as client-go's
// typed EventSinkImpl is: each Event in its own namespace. The recorder
// calls it without a context; the client's timeout bounds each request.
// Errors pass unwrapped: the recorder tells an Event that has expired
// before its patch, and one that exists already, by the API error's type.
type eventSink struct{ rc rest.Interface }

func (s eventSink) client(ns string) *gentype.ClientWithList[*corev1.Event, *corev1.EventList] {
	return gentype.NewClientWithList[*corev1.Event, *corev1.EventList]("events", s.rc, coreParams, ns,
		func() *corev1.Event { return &corev1.Event{} }, func() *corev1.EventList { return &corev1.EventList{} })
}

func (s eventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	return s.client(e.Namespace).Create(context.Background(), e, metav1.CreateOptions{})
}

func (s eventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	return s.client(e.Namespace).Update(context.Background(), e, metav1.UpdateOptions{})
}

func (s eventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.client(e.Namespace).Patch(context.Background(), e.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}

var _ record.EventSink = eventSink{}
