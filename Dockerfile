# Multi-stage build of the two services. Build one with
#   docker build --build-arg CMD=ingest -t nofly-ingest .
#   docker build --build-arg CMD=alerter -t nofly-alerter .
FROM golang:1.26 AS build
ARG CMD=ingest
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/nofly ./cmd/${CMD}

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/nofly /nofly
COPY --from=build /src/testdata/zones /zones
USER nonroot
ENTRYPOINT ["/nofly"]
