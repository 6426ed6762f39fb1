package flagcheck

import "testing"

const help = `usage: deployment_service_exporter [<flags>]

Flags:
  -h, --[no-]help              Show context-sensitive help (also try --help-long and --help-man).
      --api.url=API.URL        Base URL of the deployment service.
      --locations.detail-id=LOCATIONS.DETAIL-ID ...
                               Location id whose detail view is fetched.
      --[no-]demo              Start an embedded sample service.
      --web.listen-address=:10044 ...
                               Addresses on which to expose metrics.
      --version                Show application version.
`

func TestParseAndCheck(t *testing.T) {
	s, err := Parse(help)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		errs int
	}{
		{"known flags", []string{"--demo", "--api.url=http://x", "--locations.detail-id=3", "--version"}, 0},
		{"value in next argument", []string{"--api.url", "http://x", "--no-demo"}, 0},
		{"toolkit flag with placeholder default", []string{"--web.listen-address=:10044"}, 0},
		{"unknown flag", []string{"--api.uri=http://x"}, 1},
		{"missing value", []string{"--api.url"}, 1},
		{"value on a boolean", []string{"--demo=true"}, 1},
		{"positional argument", []string{"demo"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.Check(tt.args); len(got) != tt.errs {
				t.Errorf("Check(%q) = %v, want %d errors", tt.args, got, tt.errs)
			}
		})
	}
}

func TestParseEmpty(t *testing.T) {
	if _, err := Parse("no flags here"); err == nil {
		t.Error("Parse of text without flags succeeded")
	}
}
