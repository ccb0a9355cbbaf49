package demo

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// ensureConfigMaps makes the demo's namespaces (its own and its records')
// and its status ConfigMap on a real API server, as the manifests would,
// keeping any that exist. The probes create their records themselves.
func ensureConfigMaps(ctx context.Context, kc *kube.Client, s settings.Settings) error {
	c, err := corev1client.NewForConfig(kc.Config())
	if err != nil {
		return fmt.Errorf("kubernetes core/v1 client: %w", err)
	}
	for _, name := range []string{s.Namespace, s.RecordsNamespace()} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := c.Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	for _, name := range []string{s.StatusConfigMap} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace}}
		if _, err := c.ConfigMaps(s.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create configmap %s/%s: %w", s.Namespace, name, err)
		}
	}
	return nil
}
