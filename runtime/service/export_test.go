package service

// RouteRoles lists the API routes' patterns with the roles that may use
// each, for the table test that sends every route every key.
func RouteRoles() map[string][]Role {
	out := map[string][]Role{}
	for _, rt := range apiRoutes {
		for _, r := range Roles {
			if rt.roles&r.bit() != 0 {
				out[rt.pattern] = append(out[rt.pattern], r)
			}
		}
	}
	return out
}
