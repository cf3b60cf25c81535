# Builds the corral binary (master, agent and client in one).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=1 go build -o /out/corral ./cmd/corral

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/corral /usr/local/bin/corral
ENTRYPOINT ["/usr/local/bin/corral"]
