package api

import "github.com/go-chi/chi/v5"

// mountZones adds the /v1/zones routes.
func (s *Server) mountZones(r chi.Router) {}
