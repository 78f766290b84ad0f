// Command gen-sdk-dotnet writes the .NET SDK of a Pulumi package schema, as `pulumi package gen-sdk --language
// dotnet` does. scripts/gen-sdk.sh builds it into the cache and runs it to make the checked-in sdk/dotnet.
//
// The .NET generator is not part of pkg/v3 but of pulumi-dotnet
// (github.com/pulumi/pulumi-dotnet/pulumi-language-dotnet/v3/codegen, the code of pulumi-language-dotnet), and the
// language host itself cannot be had as a plugin here, so this command calls the generator directly, beside the
// pinned CLI's pkg/v3 (v3.274.1, as in ../pulumi-cli/go.mod). A module of its own, as the Java generator's is:
// each generator's dependencies stay its own, and moving one never moves the other. It binds the schema with
// validation, as the CLI does before handing it to a host, and writes what the generator returns, as the host
// does.
//
//	gen-sdk-dotnet --schema schema.json --logo FILE --out DIR
//
// The generator downloads the schema's logoUrl into the SDK (logo.png). This command answers that one request
// with FILE (the repository's copy of the logo) and refuses every other: generation stays offline and gives the
// same bytes on every machine.
//
// DIR is emptied first. The schema must not reference other packages: there is no plugin host here to load them.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/blang/semver"
	dotnet "github.com/pulumi/pulumi-dotnet/pulumi-language-dotnet/v3/codegen"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

func main() {
	schemaPath := flag.String("schema", "", "the package schema (JSON)")
	logo := flag.String("logo", "", "the file the schema's logoUrl names")
	out := flag.String("out", "", "the folder to write the SDK into (emptied first)")
	flag.Parse()
	if *schemaPath == "" || *out == "" || *logo == "" {
		fmt.Fprintln(os.Stderr, "usage: gen-sdk-dotnet --schema schema.json --logo FILE --out DIR")
		os.Exit(2)
	}
	if err := run(*schemaPath, *logo, *out); err != nil {
		fmt.Fprintf(os.Stderr, "gen-sdk-dotnet: %v\n", err)
		os.Exit(1)
	}
}

func run(schemaPath, logo, out string) error {
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
	if pkg.LogoURL == "" {
		return errors.New("the schema has no logoUrl: the generator would download Pulumi's logo")
	}
	http.DefaultTransport = localFile{url: pkg.LogoURL, path: logo}
	files, err := dotnet.GeneratePackage("pulumi-language-dotnet", pkg, nil, nil)
	if err != nil {
		return fmt.Errorf("generating the .NET SDK: %w", err)
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

// localFile answers a GET of url with the file at path, and fails any other request.
type localFile struct{ url, path string }

func (f localFile) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.URL.String() != f.url {
		return nil, fmt.Errorf("gen-sdk-dotnet makes no request but for the logo (%s): refused %s %s",
			f.url, req.Method, req.URL)
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return nil, err
	}
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader(string(data))), ContentLength: int64(len(data)),
		Request: req,
	}, nil
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
