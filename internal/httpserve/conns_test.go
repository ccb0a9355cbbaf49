package httpserve

// ConnStats counts a server's connections.
type ConnStats struct {
	// Open is the number held now.
	Open int
	// Accepted counts those taken in since the start; Refused those
	// closed on arrival for being over MaxConns or MaxConnsPerHost.
	Accepted, Refused uint64
}

// Conns counts the server's connections.
func (s *Server) Conns() ConnStats {
	s.ln.mu.Lock()
	defer s.ln.mu.Unlock()
	return ConnStats{Open: s.ln.open, Accepted: s.ln.accepted.Load(), Refused: s.ln.refused.Load()}
}
