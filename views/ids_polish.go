package views

// Ids of the layout and polish work (issue 21 item 9).
const (
	// FlashToastID is a toast rendered with the page (the setup welcome).
	FlashToastID = "flash-toast"
)
