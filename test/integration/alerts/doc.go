// Package alerts runs the real promtool on the alert rules internal/alerts
// renders: check rules on the shipped and generated files, test rules on the
// unit tests generated from the recordings.
package alerts
