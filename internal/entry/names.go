package entry

// plainName reports whether k is a field name as the format writes them.
func plainName(k string) bool {
	return every(k, func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' })
}

// NodeNameChars reports whether k is made of the characters a Kubernetes
// node name (a DNS subdomain) may have, and is not empty. The format refuses
// voter names of any other; JSON would have to escape some (Go writes & as
// \u0026), and a name written two ways would dodge the duplicate check.
func NodeNameChars(k string) bool {
	return every(k, func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' })
}

// MemberIDChars reports whether k is lowercase hex, as etcd writes member
// IDs (docs/facts.md), and not empty.
func MemberIDChars(k string) bool {
	return every(k, func(c byte) bool { return c >= 'a' && c <= 'f' || c >= '0' && c <= '9' })
}

// every reports whether k is not empty and each of its bytes is ok.
func every(k string, ok func(c byte) bool) bool {
	for i := 0; i < len(k); i++ {
		if !ok(k[i]) {
			return false
		}
	}
	return k != ""
}
