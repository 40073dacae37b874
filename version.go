package syncmedic

// Version is the syncmedic release, stamped at build time with
// -ldflags "-X github.com/syncmedic/syncmedic.Version=v1.2.3".
var Version = "v0.1.0-dev"
