// Command gen-sdk writes the Python, Node.js or Go SDK of a Pulumi package schema, as `pulumi package gen-sdk`
// does. scripts/gen-sdk.sh builds it into the cache and runs it to make the checked-in sdk/python, sdk/nodejs and
// sdk/go (the Java and .NET generators are other modules: ../../gen-sdk-java, ../../gen-sdk-dotnet).
//
// Why this exists: `pulumi package gen-sdk` does not generate code itself, it asks the language host of the
// language (pulumi-language-python, pulumi-language-nodejs, pulumi-language-go) over gRPC. On this project's machines
// none of these hosts can generate: the upstream hosts are modules the Go module proxy refuses, the repository's own Python host
// (../pulumi-language-python) leaves code generation out, and there is no Node.js host at all. The generators
// themselves are plain Go packages of pkg/v3 (codegen/python, codegen/nodejs, codegen/go), at the version of the pinned CLI
// (the pkg/v3 requirement of ../go.mod), so this command calls them directly: it binds the schema with
// validation, as the CLI does before handing it to a host, and writes what the generator returns, as a host does.
//
//	gen-sdk --schema schema.json --language python|nodejs|go --out DIR
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
	"runtime/debug"

	"github.com/blang/semver"
	gogen "github.com/pulumi/pulumi/pkg/v3/codegen/go"
	nodejs "github.com/pulumi/pulumi/pkg/v3/codegen/nodejs"
	python "github.com/pulumi/pulumi/pkg/v3/codegen/python"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
	"golang.org/x/mod/modfile"
)

func main() {
	schemaPath := flag.String("schema", "", "the package schema (JSON)")
	language := flag.String("language", "", "python, nodejs or go")
	out := flag.String("out", "", "the folder to write the SDK into (emptied first)")
	flag.Parse()
	if *schemaPath == "" || *out == "" || (*language != "python" && *language != "nodejs" && *language != "go") {
		fmt.Fprintln(os.Stderr, "usage: gen-sdk --schema schema.json --language python|nodejs|go --out DIR")
		os.Exit(2)
	}
	if err := run(*schemaPath, *language, *out); err != nil {
		fmt.Fprintf(os.Stderr, "gen-sdk: %v\n", err)
		os.Exit(1)
	}
}

func run(schemaPath, language, out string) error {
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

	// The name the generators write into each file's "do not edit" header: the language host's, as the upstream
	// hosts pass it.
	tool := "pulumi-language-" + language
	var files map[string][]byte
	switch language {
	case "python":
		files, err = python.GeneratePackage(tool, pkg, nil, noLoader{})
	case "nodejs":
		// A "local SDK", as `pulumi package add` makes: package.json's main is bin/index.js and a postinstall
		// script compiles the sources there, so `npm install` of the folder (file:, git) gives a package Node.js
		// can run; unpublished, it is never built by a release pipeline.
		files, err = nodejs.GeneratePackage(tool, pkg, nil, nil, true, noLoader{})
	case "go":
		files, err = generateGo(tool, pkg)
	}
	if err != nil {
		return fmt.Errorf("generating the %s SDK: %w", language, err)
	}

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

// generateGo writes the Go SDK as a module of its own (go.mod beside the package folder, as importBasePath
// says). The generator writes a go.mod only for a package that "supports pack"; the schema does not say so,
// because the Python and Node.js generators change their whole layout for such a package, so it is set here for
// the Go generator alone. Its go.mod requires sdk/v3 v3.269.0, whose dependencies include a module the Go
// module proxy here refuses; it is raised to the sdk/v3 this command is built with (the pinned CLI's, ../go.mod),
// which builds. scripts/gen-sdk.sh then completes go.mod and go.sum with `go mod tidy`.
func generateGo(tool string, pkg *schema.Package) (map[string][]byte, error) {
	pkg.SupportPack = true
	files, err := gogen.GeneratePackage(tool, pkg, nil)
	if err != nil {
		return nil, err
	}
	version, err := builtWith("github.com/pulumi/pulumi/sdk/v3")
	if err != nil {
		return nil, err
	}
	for name, content := range files {
		if filepath.Base(name) != "go.mod" {
			continue
		}
		gomod, err := modfile.Parse(name, content, nil)
		if err != nil {
			return nil, err
		}
		if err := gomod.AddRequire("github.com/pulumi/pulumi/sdk/v3", version); err != nil {
			return nil, err
		}
		if files[name], err = gomod.Format(); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// builtWith is the version of module path this command was built with.
func builtWith(path string) (string, error) {
	info, ok := debug.ReadBuildInfo()
	if ok {
		for _, dep := range info.Deps {
			if dep.Path == path {
				return dep.Version, nil
			}
		}
	}
	return "", fmt.Errorf("gen-sdk was built without %s", path)
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
