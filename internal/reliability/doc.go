// Package reliability holds the fault and load tests that span every package and the daemon binary: restarts,
// dropped streams, unavailable APIs and Slack outages, on the real control plane of internal/testenv.
package reliability
