package api

import "github.com/go-chi/chi/v5"

// mountEvents adds the /v1/events routes.
func (s *Server) mountEvents(r chi.Router) {}
