package main

import (
	"fmt"
	"io"

	"github.com/prometheus/common/config"

	"github.com/deployment-service/deployment_service_exporter/client"
	moduleconfig "github.com/deployment-service/deployment_service_exporter/config"
)

// checkConfig answers --config.check: it checks everything a start would,
// prints each problem on a line or OK, and returns the exit code.
func checkConfig(f flagValues, stdout, stderr io.Writer) int {
	var problems []string
	if f.configFile == "" && f.httpConfigFile == "" && f.apiURL == "" && !f.demo {
		problems = append(problems, "--config.check has nothing to check: give --config.file, --api.http-config.file or --api.url")
	}
	if f.configFile != "" {
		problems = append(problems, moduleconfig.Check(f.configFile)...)
	}
	if err := checkMetricsTarget(f); err != nil {
		problems = append(problems, err.Error())
	}
	for _, p := range problems {
		_, _ = fmt.Fprintf(stderr, "%s: %s\n", exporterName, p)
	}
	if len(problems) > 0 {
		return 1
	}
	_, _ = fmt.Fprintln(stdout, "OK")
	return 0
}

// checkMetricsTarget checks the flags of the service behind /metrics and
// builds its HTTP client; without --api.url it still reads its file.
func checkMetricsTarget(f flagValues) error {
	if err := validateLimits(f); err != nil {
		return err
	}
	var hc config.HTTPClientConfig
	if f.apiURL != "" || f.demo {
		s, err := validate(f)
		if err != nil {
			return err
		}
		hc = s.target.Client.HTTPClientConfig
	} else if f.httpConfigFile != "" {
		c, err := moduleconfig.LoadHTTPClientConfig(f.httpConfigFile)
		if err != nil {
			return fmt.Errorf("--api.http-config.file %s: %w", f.httpConfigFile, err)
		}
		hc = *c
	}
	if _, err := client.NewTransport(hc, ""); err != nil {
		return fmt.Errorf("the HTTP client of the service behind /metrics cannot be built: %w", err)
	}
	return nil
}
