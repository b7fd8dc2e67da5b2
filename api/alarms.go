package api

import "github.com/go-chi/chi/v5"

// mountAlarms adds the /v1/alarms routes.
func (s *Server) mountAlarms(r chi.Router) {}
