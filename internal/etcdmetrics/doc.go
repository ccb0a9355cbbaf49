// Package etcdmetrics reads an etcd member's metrics page.
package etcdmetrics
