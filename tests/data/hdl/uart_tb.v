// A UART transmitter and receiver on a 50 MHz system clock (2 MBd, 8N1): no SPI bus, a
// free-running clk beside serial lines with no clock of their own; 1 ps timescale.
`timescale 1ns / 1ps

module uart_tx #(parameter BIT = 25) (
    input wire clk, rst_n, send, input wire [7:0] byte_in,
    output reg tx, output reg busy
);
    reg [9:0] frame;
    reg [8:0] count;
    reg [3:0] n;
    always @(posedge clk or negedge rst_n)
        if (!rst_n) begin tx <= 1; busy <= 0; count <= 0; n <= 0; end
        else if (!busy) begin
            if (send) begin frame <= {1'b1, byte_in, 1'b0}; busy <= 1; count <= 0; n <= 0; end
        end else if (count == BIT - 1) begin
            count <= 0; tx <= frame[0]; frame <= {1'b1, frame[9:1]}; n <= n + 1;
            if (n == 10) begin busy <= 0; tx <= 1; end
        end else count <= count + 1;
endmodule

module uart_rx #(parameter BIT = 25) (
    input wire clk, rst_n, rx, output reg [7:0] data, output reg valid
);
    reg [8:0] count;
    reg [3:0] n;
    reg active;
    reg [7:0] sh;
    always @(posedge clk or negedge rst_n)
        if (!rst_n) begin active <= 0; valid <= 0; count <= 0; n <= 0; end
        else begin
            valid <= 0;
            if (!active) begin
                if (!rx) begin active <= 1; count <= BIT / 2; n <= 0; end
            end else if (count == BIT - 1) begin
                count <= 0; n <= n + 1;
                if (n >= 1 && n <= 8) sh <= {rx, sh[7:1]};
                if (n == 9) begin active <= 0; data <= sh; valid <= 1; end
            end else count <= count + 1;
        end
endmodule

module tb;
    reg clk = 0, rst_n = 0, send = 0;
    reg [7:0] b;
    wire line, busy, valid;
    wire [7:0] got;
    always #10 clk = ~clk;
    uart_tx u_tx (.clk(clk), .rst_n(rst_n), .send(send), .byte_in(b), .tx(line), .busy(busy));
    uart_rx u_rx (.clk(clk), .rst_n(rst_n), .rx(line), .data(got), .valid(valid));
    integer i;
    initial begin
        $dumpfile("uart_tb.vcd");
        $dumpvars(0, tb);
        #55 rst_n = 1;
        for (i = 0; i < 12; i = i + 1) begin
            @(posedge clk) begin b <= 8'h41 + i * 13; send <= 1; end
            @(posedge clk) send <= 0;
            wait (busy);
            wait (!busy);
            #(300 + 200 * i);
        end
        #2000 $finish;
    end
endmodule
