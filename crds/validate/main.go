// Command validate checks the InferenceService CRD, and objects against it, with the API server's own code
// (k8s.io/apiextensions-apiserver): structural schema, CEL compilation and cost budget, pruning, OpenAPI
// and CEL validation. No cluster needed.
//
//	go run . ../inferscale.dev_inferenceservices.yaml [objects.json ...]
//
// Each objects file holds a JSON list of InferenceServices; one JSON line per object is printed:
// {"index": i, "errors": [...]}. Exit status 1 when the CRD itself is invalid.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: validate CRD.yaml [objects.json ...]")
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail("%v", err)
	}
	v1 := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, v1); err != nil {
		fail("CRD: %v", err)
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(v1)
	crd := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(v1, crd, nil); err != nil {
		fail("CRD: %v", err)
	}
	if errs := validation.ValidateCustomResourceDefinition(context.Background(), crd); len(errs) > 0 {
		for _, e := range errs {
			fmt.Println("CRD invalid:", e)
		}
		os.Exit(1)
	}
	fmt.Println("CRD valid")

	// The internal form keeps one top-level schema when every version shares it.
	schema := crd.Spec.Validation.OpenAPIV3Schema
	if crd.Spec.Versions[0].Schema != nil {
		schema = crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	}
	structural, err := structuralschema.NewStructural(schema)
	if err != nil {
		fail("structural: %v", err)
	}
	openapi, _, err := apiservervalidation.NewSchemaValidator(schema)
	if err != nil {
		fail("openapi: %v", err)
	}
	rules := cel.NewValidator(structural, true, celconfig.PerCallLimit)

	for _, path := range os.Args[2:] {
		data, err := os.ReadFile(path)
		if err != nil {
			fail("%v", err)
		}
		var objects []map[string]interface{}
		// Whole numbers decode to int64, as the API server decodes request bodies.
		if err := utiljson.Unmarshal(data, &objects); err != nil {
			fail("%s: %v", path, err)
		}
		for i, obj := range objects {
			structuralpruning.Prune(obj, structural, true)
			errs := apiservervalidation.ValidateCustomResource(nil, obj, openapi)
			if rules != nil {
				more, _ := rules.Validate(context.Background(), nil, structural, obj, nil, celconfig.RuntimeCELCostBudget)
				errs = append(errs, more...)
			}
			line, _ := json.Marshal(map[string]any{"index": i, "errors": messages(errs)})
			fmt.Println(string(line))
		}
	}
}

func messages(errs field.ErrorList) []string {
	out := []string{}
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}
