// Command podsecurity evaluates every pod template in a stream of manifests against the restricted Pod
// Security Standard with the admission plugin's own checks (k8s.io/pod-security-admission). No cluster needed.
//
//	helm template charts/inferscale | go run ./deploy/podsecurity [-level restricted|baseline]
//
// Prints one line per violation and exits 1 if there is any (or no pod template at all); 2 on bad input.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"
)

func main() {
	level := flag.String("level", string(api.LevelRestricted), "Pod Security Standard level: restricted or baseline")
	flag.Parse()
	parsed, err := api.ParseLevel(*level)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	standard := api.LevelVersion{Level: parsed, Version: api.LatestVersion()}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(os.Stdin))
	pods, violations := 0, 0
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		var head struct{ Kind string }
		if err := yaml.Unmarshal(doc, &head); err != nil || head.Kind != "Deployment" {
			continue
		}
		var deployment appsv1.Deployment
		if err := yaml.UnmarshalStrict(bytes.TrimSpace(doc), &deployment); err != nil {
			fmt.Fprintln(os.Stderr, "Deployment:", err)
			os.Exit(2)
		}
		pods++
		template := deployment.Spec.Template
		for _, result := range evaluator.EvaluatePod(standard, &template.ObjectMeta, &template.Spec) {
			if !result.Allowed {
				violations++
				fmt.Printf("%s: %s: %s\n", deployment.Name, result.ForbiddenReason, result.ForbiddenDetail)
			}
		}
	}
	fmt.Printf("%d pod templates, %d violations of %s:%s\n", pods, violations, standard.Level, standard.Version.String())
	if violations > 0 || pods == 0 {
		os.Exit(1)
	}
}
