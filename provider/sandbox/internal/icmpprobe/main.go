// Command icmpprobe sends one ICMP echo request carrying the payload of
// its first argument to each address of the others, through an
// unprivileged ICMP socket (what a box's user may open where
// net.ipv4.ping_group_range allows it, as in Docker's containers), and
// prints "reply ADDR" or "none ADDR" for each. The egress tests run it in
// a box.
package main

import (
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: icmpprobe PAYLOAD ADDR...")
		os.Exit(2)
	}
	c, err := icmp.ListenPacket("udp4", "0.0.0.0")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	defer c.Close()
	for i, addr := range os.Args[2:] {
		msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: os.Getpid() & 0xffff, Seq: i + 1, Data: []byte(os.Args[1])}}
		b, err := msg.Marshal(nil)
		if err == nil {
			_, err = c.WriteTo(b, &net.UDPAddr{IP: net.ParseIP(addr)})
		}
		if err != nil {
			fmt.Println("error", addr, err)
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 1500)
		if _, _, err := c.ReadFrom(buf); err != nil {
			fmt.Println("none", addr)
			continue
		}
		fmt.Println("reply", addr)
	}
}
