// Command gen-sdk-java writes the Java SDK of a Pulumi package schema, as `pulumi package gen-sdk --language java`
// does. scripts/gen-sdk.sh builds it into the cache and runs it to make the checked-in sdk/java.
//
// Why a module of its own: the Java generator is not part of pkg/v3 but of pulumi-java
// (github.com/pulumi/pulumi-java/pkg/codegen/java, the code of pulumi-language-java and pulumi-java-gen). The
// language host itself cannot be had as a plugin here, so this command calls the generator directly, beside
// the pkg/v3 of the pinned CLI (v3.274.1, as in ../pulumi-cli/go.mod), which pulumi-java v1.34.0 builds with.
// It binds the schema with validation, as the CLI does before handing it to a host, and writes what the
// generator returns, as the host does.
//
//	gen-sdk-java --schema schema.json --out DIR
//
// DIR is emptied first. The schema must not reference other packages: there is no plugin host here to load them.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/blang/semver"
	java "github.com/pulumi/pulumi-java/pkg/codegen/java"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

func main() {
	schemaPath := flag.String("schema", "", "the package schema (JSON)")
	out := flag.String("out", "", "the folder to write the SDK into (emptied first)")
	flag.Parse()
	if *schemaPath == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: gen-sdk-java --schema schema.json --out DIR")
		os.Exit(2)
	}
	if err := run(*schemaPath, *out); err != nil {
		fmt.Fprintf(os.Stderr, "gen-sdk-java: %v\n", err)
		os.Exit(1)
	}
}

func run(schemaPath, out string) error {
	data, err := os.ReadFile(schemaPath)
	if err != nil {
		return err
	}
	var spec schema.PackageSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("%s: %w", schemaPath, err)
	}
	pkg, diags, err := schema.BindSpec(spec, noLoader{}, schema.ValidationOptions{})
	if err != nil {
		return fmt.Errorf("binding %s: %w", schemaPath, err)
	}
	if diags.HasErrors() {
		return fmt.Errorf("binding %s: %w", schemaPath, diags)
	}
	// Not local (the publishable layout: build.gradle and settings.gradle, as the schema's language.java asks)
	// and not the legacy pulumi-java-gen defaults: what `pulumi package gen-sdk --language java` writes.
	files, err := java.GeneratePackage("pulumi-language-java", pkg, nil, nil, false, false)
	if err != nil {
		return fmt.Errorf("generating the Java SDK: %w", err)
	}
	return write(out, files)
}

func write(out string, files map[string][]byte) error {
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	for name, content := range files {
		path := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// noLoader refuses to load other packages: binding and generating a self-contained schema never asks it.
type noLoader struct{}

var errNoLoader = errors.New("the schema references another package; gen-sdk loads none (no plugin host here)")

func (noLoader) LoadPackage(string, *semver.Version) (*schema.Package, error) {
	return nil, errNoLoader
}

func (noLoader) LoadPackageV2(context.Context, *schema.PackageDescriptor) (*schema.Package, error) {
	return nil, errNoLoader
}

func (noLoader) LoadPackageReference(string, *semver.Version) (schema.PackageReference, error) {
	return nil, errNoLoader
}

func (noLoader) LoadPackageReferenceV2(context.Context, *schema.PackageDescriptor) (schema.PackageReference, error) {
	return nil, errNoLoader
}
