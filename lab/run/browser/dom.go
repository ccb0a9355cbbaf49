package browser

import (
	"strings"

	"golang.org/x/net/html"
)

// Walk calls f on n and every node under it, in document order.
func Walk(n *html.Node, f func(*html.Node)) {
	f(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		Walk(c, f)
	}
}

// Attr is the value of n's attribute key.
func Attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// Text is the text under n, as a reader sees it (no markup); empty for nil.
func Text(n *html.Node) string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	Walk(n, func(x *html.Node) {
		if x.Type == html.TextNode {
			b.WriteString(x.Data)
		}
	})
	return b.String()
}

// Find is the first element under n for which match is true, or nil.
func Find(n *html.Node, match func(*html.Node) bool) *html.Node {
	var found *html.Node
	Walk(n, func(x *html.Node) {
		if found == nil && x.Type == html.ElementNode && match(x) {
			found = x
		}
	})
	return found
}

// ByID is the element with that id, or nil.
func ByID(n *html.Node, id string) *html.Node {
	return Find(n, func(x *html.Node) bool { v, ok := Attr(x, "id"); return ok && v == id })
}

// Children are n's child elements named tag, those of a tbody too (the
// parser adds one to every table).
func Children(n *html.Node, tag string) []*html.Node {
	var out []*html.Node
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && c.Data == tag {
			out = append(out, c)
		}
		if c.Type == html.ElementNode && c.Data == "tbody" {
			out = append(out, Children(c, tag)...)
		}
	}
	return out
}
