package sampleservice

// Word lists the generator draws from. Duplicates in statuses and
// environments are deliberate: they skew the mix towards what a real fleet
// looks like (mostly active, mostly production).
var (
	adjectives = []string{
		"amber", "brisk", "cobalt", "dusty", "ember", "frosty", "golden", "hollow",
		"ivory", "jade", "keen", "lunar", "misty", "noble", "onyx", "proud",
		"quiet", "rustic", "silent", "tidal", "umber", "vivid", "wild", "young",
	}
	nouns = []string{
		"falcon", "harbor", "meadow", "summit", "canyon", "glacier", "orchard",
		"beacon", "lagoon", "prairie", "forge", "quarry", "delta", "ridge",
		"tundra", "atlas", "comet", "nebula", "pioneer", "voyager",
	}
	services = []string{
		"checkout", "payments", "search", "catalog", "inventory", "billing",
		"auth", "notifications", "reporting", "gateway", "ledger", "shipping",
	}
	regions = []string{
		"eu-west-1", "eu-central-1", "us-east-1", "us-west-2",
		"ap-southeast-1", "ap-northeast-1", "sa-east-1", "ca-central-1",
	}
	statuses = []string{
		"active", "active", "active", "active", "active", "degraded",
		"maintenance", "provisioning", "decommissioned",
	}
	environments = []string{
		"production", "production", "production", "staging", "staging",
		"development", "qa", "sandbox",
	}
	tagPool = []string{
		"critical", "pci", "gdpr", "canary", "blue", "green", "legacy", "spot",
		"arm64", "gpu", "edge", "internal", "public", "beta", "on-call",
	}
	users = []string{
		"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi",
		"ivan", "judy", "mallory", "niaj", "olivia", "peggy", "rupert", "sybil",
	}
	teams = []string{
		"platform", "payments", "growth", "core", "data", "mobile", "search", "infra",
	}
	schedules = []string{
		"nightly", "on every merge", "weekly on Tuesdays", "after manual approval",
		"hourly", "during business hours",
	}
	visibilities = []string{"private", "internal", "public"}
	deployStates = []string{"succeeded", "succeeded", "succeeded", "failed", "rolled_back", "running"}
)
