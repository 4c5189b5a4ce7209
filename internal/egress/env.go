package egress

// ProxyEnv points a sandbox's programs at a gateway's proxy at hostPort:
// package managers, git, curl and language runtimes each read one or
// another of these spellings. The sandbox's own loopback stays direct.
func ProxyEnv(hostPort string) map[string]string {
	proxy, socks := "http://"+hostPort, "socks5h://"+hostPort
	noProxy := "localhost,127.0.0.1,::1"
	return map[string]string{
		"HTTP_PROXY": proxy, "http_proxy": proxy,
		"HTTPS_PROXY": proxy, "https_proxy": proxy,
		"ALL_PROXY": socks, "all_proxy": socks,
		"NO_PROXY": noProxy, "no_proxy": noProxy,
	}
}
