package api

import "github.com/go-chi/chi/v5"

// mountDrones adds the /v1/drones routes.
func (s *Server) mountDrones(r chi.Router) {}
