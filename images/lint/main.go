// dockerfile-lint: lints Dockerfiles with BuildKit's own checks — the rules `docker build
// --check` runs (JSONArgsRecommended, UndefinedVar, FromAsCasing, SecretsUsedInArgOrEnv,
// CopyIgnoredFile, ... all of them, experimental ones included) — without a Docker engine or a
// registry: base images resolve to a stand-in config, and .dockerignore is read from the
// build context given with -context.
//
//	go run . -context ../.. ../../Dockerfile ../../examples/handlers/Dockerfile
//
// Prints one JSON object per file: {"file", "warnings": [{"rule", "message", "line"}], "error"}.
// Exit status: 0 clean, 1 findings, 2 usage or I/O error.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerui"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	digest "github.com/opencontainers/go-digest"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"
)

// offlineResolver answers every base image with the config of a Debian-based Node image, so the
// linter never reaches a registry (UndefinedVar then knows PATH, NODE_VERSION, ...).
type offlineResolver struct{}

func (offlineResolver) ResolveImageConfig(_ context.Context, ref string, _ sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	cfg := map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config": map[string]any{
			"Env":        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "NODE_VERSION=24.0.0", "YARN_VERSION=1.22.22"},
			"Entrypoint": []string{"docker-entrypoint.sh"},
			"Cmd":        []string{"node"},
			"WorkingDir": "/",
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{}},
	}
	dt, err := json.Marshal(cfg)
	return ref, digest.FromBytes(dt), dt, err
}

// sourceMap is what the lint results point into; BuildKit expects its Definition to be set.
func sourceMap(file string, dt []byte) *llb.SourceMap {
	sm := llb.NewSourceMap(nil, filepath.Base(file), "Dockerfile", dt)
	sm.Definition = &llb.Definition{}
	return sm
}

type finding struct {
	Rule    string `json:"rule"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
}

type report struct {
	File     string    `json:"file"`
	Warnings []finding `json:"warnings"`
	Error    string    `json:"error,omitempty"`
}

func lintFile(ctx context.Context, file string, ignore *patternmatcher.PatternMatcher) (report, error) {
	rep := report{File: file, Warnings: []finding{}}
	dt, err := os.ReadFile(file)
	if err != nil {
		return rep, err
	}
	res, err := dockerfile2llb.DockerfileLint(ctx, dt, dockerfile2llb.ConvertOpt{
		Config:         dockerui.Config{LinterConfig: &linter.Config{ExperimentalAll: true}},
		SourceMap:      sourceMap(file, dt),
		MetaResolver:   offlineResolver{},
		TargetPlatform: &ocispecs.Platform{OS: "linux", Architecture: "amd64"},
	})
	if err != nil {
		return rep, err
	}
	for _, w := range res.Warnings {
		f := finding{Rule: w.RuleName, Message: w.Detail}
		if w.Location != nil && len(w.Location.Ranges) > 0 {
			f.Line = int(w.Location.Ranges[0].Start.Line)
		}
		rep.Warnings = append(rep.Warnings, f)
	}
	if res.Error != nil {
		rep.Error = res.Error.Message
	}
	// CopyIgnoredFile needs the build context's .dockerignore, which BuildKit reads through its
	// session; apply the same rule here with the same matcher.
	if ignore != nil {
		ast, err := parser.Parse(bytesReader(dt))
		if err != nil {
			return rep, err
		}
		stages, _, err := instructions.Parse(ast.AST, nil)
		if err != nil {
			return rep, err
		}
		for _, st := range stages {
			for _, cmd := range st.Commands {
				var srcs []string
				var from string
				var line int
				switch c := cmd.(type) {
				case *instructions.CopyCommand:
					srcs, from = c.SourcePaths, c.From
					if loc := c.Location(); len(loc) > 0 {
						line = loc[0].Start.Line
					}
				case *instructions.AddCommand:
					srcs = c.SourcePaths
					if loc := c.Location(); len(loc) > 0 {
						line = loc[0].Start.Line
					}
				default:
					continue
				}
				if from != "" {
					continue
				}
				for _, src := range srcs {
					p := filepath.Clean(filepath.FromSlash(src))
					if p == "." {
						continue
					}
					if ok, _ := ignore.MatchesOrParentMatches(p); ok {
						rep.Warnings = append(rep.Warnings, finding{Rule: "CopyIgnoredFile", Message: linter.RuleCopyIgnoredFile.Format(cmd.Name(), src), Line: line})
					}
				}
			}
		}
	}
	return rep, nil
}

func main() {
	contextDir := flag.String("context", "", "build context whose .dockerignore applies (optional)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: dockerfile-lint [-context DIR] Dockerfile...")
		os.Exit(2)
	}
	var ignore *patternmatcher.PatternMatcher
	if *contextDir != "" {
		f, err := os.Open(filepath.Join(*contextDir, ".dockerignore"))
		if err == nil {
			patterns, err := ignorefile.ReadAll(f)
			f.Close()
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			if ignore, err = patternmatcher.New(patterns); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
	}
	status := 0
	enc := json.NewEncoder(os.Stdout)
	for _, file := range flag.Args() {
		rep, err := lintFile(context.Background(), file, ignore)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", file, err)
			os.Exit(2)
		}
		if len(rep.Warnings) > 0 || rep.Error != "" {
			status = 1
		}
		_ = enc.Encode(rep)
	}
	os.Exit(status)
}
