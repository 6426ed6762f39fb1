// Command composecheck checks deploy/compose without a Docker engine.
//
// It loads the compose file with the compose-spec reference loader (schema
// validation, interpolation, path resolution), then checks what `docker
// compose up` would trip over later: every bind-mounted file or directory
// exists, the exporter's build context holds the Dockerfile, images are
// pinned, ports are published on loopback only, the exporter runs --demo
// with arguments the binary accepts (with -help), and the files each service
// is told to read inside its container (Prometheus' config and rule files,
// Alertmanager's config, Grafana's provisioning and dashboards) are really
// there once the mounts are applied.
//
//	composecheck -help help.txt deploy/compose/compose.yaml
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/deployment-service/deployment_service_exporter/tools/internal/flagcheck"
)

func main() {
	helpFile := flag.String("help", "", "file with the exporter's --help output; the exporter's command must use flags it lists")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: composecheck [-help FILE] COMPOSE_FILE")
		os.Exit(2)
	}
	project, err := load(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "composecheck:", err)
		os.Exit(1)
	}
	fmt.Printf("ok   %s loads: %d services\n", flag.Arg(0), len(project.Services))

	c := &checker{project: project}
	if *helpFile != "" {
		if c.flags, err = flagcheck.ParseFile(*helpFile); err != nil {
			fmt.Fprintln(os.Stderr, "composecheck:", err)
			os.Exit(1)
		}
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

// load reads the compose file as `docker compose` does, without the
// caller's environment or .env file, so the result does not depend on
// the machine.
func load(path string) (*types.Project, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	opts, err := cli.NewProjectOptions([]string{abs},
		cli.WithWorkingDirectory(filepath.Dir(abs)),
		cli.WithResolvedPaths(true),
		cli.WithInterpolation(true),
		cli.WithNormalization(true),
		cli.WithConsistency(true),
	)
	if err != nil {
		return nil, err
	}
	return opts.LoadProject(context.Background())
}
