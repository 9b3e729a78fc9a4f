package cluster

import (
	"maps"
	"slices"
)

// GatewayKeys are config keys that set the `ecstore serve` flags of the
// same names, so that a gateway's whole setup can live in the config
// file (`ecstore serve --config FILE`); a flag on the command line wins.
// Other commands ignore them. Their values are checked when the gateway
// applies them.
var GatewayKeys = []string{
	"root-addr", "metrics-addr", "pprof-addr", "s3-addr", "s3-domain", "s3-upload-expiry",
	"http-addr", "http-anonymous-writes", "root-anonymous-writes", "root-token-required",
	"tls-cert", "tls-key", "page-checksums", "heal", "heal-rate", "heal-interval", "heartbeat", "memory-limit", "page-checksum-cache",
}

// setGateway records a gateway setting; handled is false for other keys.
func (c *Config) setGateway(key, value string) (handled bool) {
	if !slices.Contains(GatewayKeys, key) {
		return false
	}
	if c.gateway == nil {
		c.gateway = map[string]string{}
	}
	c.gateway[key] = value
	return true
}

// GatewaySettings returns the gateway settings of the config (key ->
// value); the map is a copy.
func (c *Config) GatewaySettings() map[string]string { return maps.Clone(c.gateway) }
