// Command k8scheck checks the rendered Kubernetes manifests of
// deploy/kubernetes (the output of `kubectl kustomize`) without a cluster.
//
// Every object is decoded strictly into its Kubernetes API type (k8s.io/api,
// and the Prometheus Operator's types for ServiceMonitor and PrometheusRule):
// an unknown or misspelt field, a duplicate field or a malformed quantity is
// an error, as is a kind the check does not know. Then the objects are checked
// against each other and against what the exporter needs: a restricted
// security context, resources, probes on /-/healthy and /-/ready, the API key
// mounted from a Secret and read through --api.key-file, selectors and ports
// that connect, and (with -help) container arguments the binary accepts.
//
//	kubectl kustomize deploy/kubernetes | k8scheck -help help.txt
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/deployment-service/deployment_service_exporter/tools/internal/flagcheck"
)

// objects holds the decoded manifests by kind.
type objects struct {
	deployments     []*appsv1.Deployment
	services        []*corev1.Service
	secrets         []*corev1.Secret
	configMaps      []*corev1.ConfigMap
	serviceMonitors []*monitoringv1.ServiceMonitor
	prometheusRules []*monitoringv1.PrometheusRule
}

func main() {
	helpFile := flag.String("help", "", "file with the exporter's --help output; container arguments must be flags it lists")
	job := flag.String("job", "deployment_service", "job label the ServiceMonitor must set (the alert rules select it)")
	flag.Parse()

	in := io.Reader(os.Stdin)
	if flag.NArg() == 1 {
		f, err := os.Open(flag.Arg(0))
		if err != nil {
			fatal(err)
		}
		defer f.Close()
		in = f
	}
	objs, n, err := decodeAll(in)
	if err != nil {
		fatal(err)
	}
	fmt.Printf("ok   %d objects decoded strictly into their API types\n", n)

	c := &checker{objs: objs, job: *job}
	if *helpFile != "" {
		flags, err := flagcheck.ParseFile(*helpFile)
		if err != nil {
			fatal(err)
		}
		c.flags = flags
	}
	c.run()
	for _, e := range c.errs {
		fmt.Printf("FAIL %s\n", e)
	}
	fmt.Printf("%d passed, %d failed\n", c.passed, len(c.errs))
	if len(c.errs) > 0 {
		os.Exit(1)
	}
}

// decodeAll reads a multi-document YAML stream and decodes each document
// strictly into the API type named by its apiVersion and kind.
func decodeAll(r io.Reader) (*objects, int, error) {
	objs := &objects{}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	n := 0
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, n, err
		}
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		n++
		if err := decode(doc, objs); err != nil {
			return nil, n, fmt.Errorf("document %d: %w", n, err)
		}
	}
	if n == 0 {
		return nil, 0, errors.New("no objects in the input")
	}
	return objs, n, nil
}

func decode(doc []byte, objs *objects) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	var target any
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		o := &appsv1.Deployment{}
		objs.deployments, target = append(objs.deployments, o), o
	case "v1 Service":
		o := &corev1.Service{}
		objs.services, target = append(objs.services, o), o
	case "v1 Secret":
		o := &corev1.Secret{}
		objs.secrets, target = append(objs.secrets, o), o
	case "v1 ConfigMap":
		o := &corev1.ConfigMap{}
		objs.configMaps, target = append(objs.configMaps, o), o
	case "monitoring.coreos.com/v1 ServiceMonitor":
		o := &monitoringv1.ServiceMonitor{}
		objs.serviceMonitors, target = append(objs.serviceMonitors, o), o
	case "monitoring.coreos.com/v1 PrometheusRule":
		o := &monitoringv1.PrometheusRule{}
		objs.prometheusRules, target = append(objs.prometheusRules, o), o
	default:
		return fmt.Errorf("kind %q of apiVersion %q is not known to this check; add it", tm.Kind, tm.APIVersion)
	}
	if err := yaml.UnmarshalStrict(doc, target); err != nil {
		return fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return nil
}

func stripComments(b []byte) string {
	var sb strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			sb.WriteString(line)
			sb.WriteByte('\n')
		}
	}
	return sb.String()
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "k8scheck:", err)
	os.Exit(1)
}
