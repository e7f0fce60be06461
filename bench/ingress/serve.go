package main

import (
	"context"
	"flag"
	"net/http"
	"net/http/pprof"
	"os/signal"
	"syscall"

	"k8s.io/client-go/informers"

	"portal.dev/portal/ingress"
	"portal.dev/portal/ingress/route"
)

// serve is Portal's ingress without its command: a route.Watcher keeps the
// routing Table current from informers and package ingress serves it, as
// `portal ingress` wires them, plus /debug/pprof on the metrics address.
// run.sh uses it only while the binary has no `portal ingress` command.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the API server")
	o := ingress.DefaultOptions()
	fs.IntVar(&o.HTTPPort, "http-port", 18080, "HTTP port")
	fs.IntVar(&o.HTTPSPort, "https-port", 18443, "HTTPS port")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", "127.0.0.1:10354", "metrics and pprof address")
	fs.BoolVar(&o.AccessLog, "access-log", false, "one line per request on stdout")
	fs.StringVar(&o.DefaultSSLCertificate, "default-ssl-certificate", "", "namespace/name of the default certificate's Secret")
	fs.Parse(args)
	client, err := newClient(*kubeconfig)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	factory := informers.NewSharedInformerFactory(client, 0)
	w := route.NewWatcher(client, factory, route.WatcherOptions{
		IngressClass:          o.IngressClass,
		DefaultSSLCertificate: o.DefaultSSLCertificate,
	})
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	errs := make(chan error, 2)
	go func() { errs <- w.Run(ctx) }()

	routes := func() ingress.Routes { return w.Table() }
	m := ingress.NewMetrics()
	h := ingress.NewHandler(routes, o, m)
	srv, err := ingress.Listen(o, h, routes, w.DefaultCertificate)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	ms := &http.Server{Addr: o.MetricsBindAddress, Handler: mux}
	go ms.ListenAndServe()
	defer ms.Close()
	go func() { errs <- srv.Serve(ctx) }()
	err = <-errs
	stop()
	return err
}
