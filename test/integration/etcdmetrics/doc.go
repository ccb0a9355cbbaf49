// Package etcdmetrics scrapes a real three-process etcd cluster with
// internal/etcdmetrics: every member under writes, and a paused member.
package etcdmetrics
