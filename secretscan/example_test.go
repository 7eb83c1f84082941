package secretscan_test

import (
	"fmt"

	"github.com/toolguard/toolguard/secretscan"
)

// A tool's output mentions a card number and a Stripe key nobody declared.
// Give the Detector to the guard (guard.Options{Detector: d}) and it
// withholds both, wherever they stand; here Find shows what it finds.
func Example() {
	d, err := secretscan.New(secretscan.Options{})
	if err != nil {
		panic(err)
	}
	// A made-up key of Stripe's shape, and Visa's test card number.
	out := `Customer asked to charge 4111 1111 1111 1111; the webhook uses sk_live_Zq8R2vTn5XkW7pLm3JhY9cFd. Order 4111111111111112.`
	for _, s := range d.Find(out) {
		fmt.Println(s)
	}
	// Output:
	// 4111 1111 1111 1111
	// sk_live_Zq8R2vTn5XkW7pLm3JhY9cFd
}
