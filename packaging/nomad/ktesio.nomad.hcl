# One ktesiod on every client node: a system job. Run with `nomad job run ktesio.nomad.hcl`.
# The image is built by packaging/container/Containerfile; state and the API socket live on host
# paths (host volumes "ktesio-state" and "ktesio-run" declared in each client's configuration).
job "ktesio" {
  type = "system"

  update {
    max_parallel = 1 # host by host: agents survive a daemon upgrade, not a node-wide outage
    stagger      = "30s"
  }

  group "ktesiod" {
    network {
      port "metrics" {
        static = 9464
      }
    }

    volume "state" {
      type      = "host"
      source    = "ktesio-state"
      read_only = false
    }

    volume "run" {
      type      = "host"
      source    = "ktesio-run"
      read_only = false
    }

    service {
      name     = "ktesiod"
      port     = "metrics"
      provider = "nomad"
      tags     = ["metrics", "prometheus"]

      check {
        type     = "http"
        path     = "/healthz"
        interval = "10s"
        timeout  = "5s"
      }
    }

    task "ktesiod" {
      driver = "docker"

      config {
        image = "ktesio:0.1.0"
        ports = ["metrics"]
      }

      env {
        KTESIO_STATE_DIR      = "/var/lib/ktesio"
        KTESIO_SOCKET         = "/run/ktesio/ktesiod.sock"
        KTESIO_METRICS_LISTEN = "0.0.0.0:9464"
      }

      volume_mount {
        volume      = "state"
        destination = "/var/lib/ktesio"
      }

      volume_mount {
        volume      = "run"
        destination = "/run/ktesio"
      }

      # Longer than the ordered full stop (stop_timeout_secs 30 s + 5 s of kill confirmation).
      kill_timeout = "60s"
      kill_signal  = "SIGTERM"

      resources {
        cpu    = 100 # MHz for the daemon; agents run in this task too: size for them
        memory = 4096
      }
    }
  }
}
