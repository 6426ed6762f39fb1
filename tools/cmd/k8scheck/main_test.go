package main

import (
	"strings"
	"testing"
)

func TestDecodeStrict(t *testing.T) {
	tests := []struct {
		name, doc string
		ok        bool
	}{
		{"known kind", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  k: v\n", true},
		{"unknown field", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringDta:\n  k: v\n", false},
		{"duplicate field", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nmetadata:\n  name: t\n", false},
		{"bad quantity", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n        resources:\n          limits:\n            memory: 1Mo\n", false},
		{"unknown kind", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := decodeAll(strings.NewReader("# comment\n---\n" + tt.doc))
			if (err == nil) != tt.ok {
				t.Errorf("decodeAll error = %v, want ok %v", err, tt.ok)
			}
		})
	}
}
